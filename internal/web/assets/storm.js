// bootfleet dashboard, storm view: loaded before app.js, whose helpers
// ($, el, bytes) it uses once the page polls.
"use strict";

// The storm view: completed boots over time, bytes served per second
// (each transfer's bytes spread evenly over its duration), and how the
// machines' diskless roots arrived. known is the inventory's machines,
// for their names.
function renderStorm(boots, known) {
  const done = boots.filter((b) => b.state === "complete" && b.end).map((b) => Date.parse(b.end)).sort((a, b) => a - b);
  const machines = new Set(boots.map((b) => b.mac));
  const count = $("#storm-count");
  count.textContent = `${done.length} of ${boots.length} boots complete, ${machines.size} machines`;
  count.dataset.complete = String(done.length);
  count.dataset.machines = String(machines.size);
  const starts = boots.map((b) => Date.parse(b.start));
  const t0 = Math.min(...starts, ...done);
  const booted = done.map((t, i) => [(t - t0) / 1000, i + 1]);
  if (booted.length) booted.unshift([0, 0]);
  const buckets = new Map();
  for (const b of boots) {
    for (const t of b.transfers) {
      const s = (Date.parse(t.start) - t0) / 1000, e = Math.max((Date.parse(t.end) - t0) / 1000, s + 0.001);
      const rate = t.bytes / (e - s);
      for (let sec = Math.floor(s); sec < e; sec++) {
        const overlap = Math.min(e, sec + 1) - Math.max(s, sec);
        buckets.set(sec, (buckets.get(sec) || 0) + rate * overlap);
      }
    }
  }
  const secsList = [...buckets.keys()].sort((a, b) => a - b);
  const tp = [];
  if (secsList.length) {
    for (let sec = secsList[0]; sec <= secsList[secsList.length - 1] + 1; sec++) tp.push([sec, (buckets.get(sec) || 0) / 1e6]);
  }
  plot($("#booted"), booted, "s", "machines", true);
  plot($("#throughput"), tp, "s", "MB/s", false);
  renderRootIO(boots, known);
}

// Where a group gave up, the machine read by unicast: those rows first.
const groupOrder = { lossy: 0, silent: 1, off: 2, on: 3 };

// renderRootIO sums the root-io reports of the storm's machines, one per
// machine: the newest boot that has one (boots come newest first), since
// each report holds the machine's counters since its agent started and a
// machine booted twice would otherwise count its first root twice.
function renderRootIO(boots, known) {
  const names = {};
  for (const m of known) if (m.name) names[m.mac] = m.name;
  const latest = new Map();
  for (const b of boots) if (b.root_io && !latest.has(b.mac)) latest.set(b.mac, b.root_io);
  const sum = { multicast: 0, unicast: 0, hits: 0, misses: 0, fallbacks: 0, lost: 0, repairs: 0 };
  const groups = { on: 0, silent: 0, lossy: 0, off: 0 };
  for (const r of latest.values()) {
    sum.multicast += r.multicast_bytes; sum.unicast += r.unicast_bytes;
    sum.hits += r.cache_hit_bytes; sum.misses += r.cache_miss_bytes;
    sum.fallbacks += r.fallbacks; sum.lost += r.lost_datagrams || 0; sum.repairs += r.repairs || 0;
    groups[r.group] = (groups[r.group] || 0) + 1;
  }
  const total = sum.multicast + sum.unicast;
  const share = total ? (100 * sum.multicast / total).toFixed(1) : "";
  const p = $("#storm-root");
  Object.assign(p.dataset, {
    machines: String(latest.size), multicastBytes: String(sum.multicast), unicastBytes: String(sum.unicast),
    multicastShare: share, hitBytes: String(sum.hits), missBytes: String(sum.misses), fallbacks: String(sum.fallbacks),
    lost: String(sum.lost), repairs: String(sum.repairs),
    groupsOn: String(groups.on), groupsSilent: String(groups.silent), groupsLossy: String(groups.lossy), groupsOff: String(groups.off),
  });
  const amount = (n) => n ? bytes(n) : "0 B";
  p.textContent = latest.size
    ? `Root I/O of ${latest.size} machines: ${amount(sum.multicast)} by multicast, ${amount(sum.unicast)} by unicast` +
      (share ? ` (${share}% by multicast)` : "") + `; cache ${amount(sum.hits)} hit, ${amount(sum.misses)} missed; ` +
      `${sum.fallbacks} fallbacks; ${sum.lost} datagrams lost, ${sum.repairs} repairs asked. ` +
      `Groups: ${groups.on} on, ${groups.silent} silent, ${groups.lossy} lossy, ${groups.off} off.`
    : "No machine has reported its root I/O yet (diskless roots report through the agent).";

  const rows = [...latest].sort(([ma, a], [mb, b]) =>
    (groupOrder[a.group] ?? 9) - (groupOrder[b.group] ?? 9) || (names[ma] || ma).localeCompare(names[mb] || mb));
  const tb = $("#storm-machines tbody");
  tb.replaceChildren();
  for (const [mac, r] of rows) {
    const tr = el("tr", null, "group-" + r.group);
    Object.assign(tr.dataset, {
      mac, group: r.group, multicast: String(r.multicast_bytes), unicast: String(r.unicast_bytes),
      hits: String(r.cache_hit_bytes), misses: String(r.cache_miss_bytes), fallbacks: String(r.fallbacks),
    });
    const lostRep = r.group === "off" ? "-" : (r.lost_datagrams || 0) + " / " + (r.repairs || 0);
    tr.append(el("td", names[mac] ? names[mac] + " (" + mac + ")" : mac), el("td", r.group, "group"),
      el("td", bytes(r.multicast_bytes)), el("td", bytes(r.unicast_bytes)), el("td", bytes(r.cache_hit_bytes)),
      el("td", bytes(r.cache_miss_bytes)), el("td", String(r.fallbacks)), el("td", lostRep));
    tb.append(tr);
  }
  $("#storm-machines").hidden = !rows.length;
}

function plot(cv, pts, xunit, yunit, steps) {
  const g = cv.getContext("2d"), W = cv.width, H = cv.height, L = 44, B = 22;
  g.clearRect(0, 0, W, H);
  g.fillStyle = "#556"; g.font = "11px system-ui";
  if (!pts.length) { g.fillText("no data yet", W / 2 - 30, H / 2); return; }
  const xmax = Math.max(...pts.map((p) => p[0]), 1), ymax = Math.max(...pts.map((p) => p[1]), 1) * 1.1;
  const X = (x) => L + (W - L - 8) * x / xmax, Y = (y) => H - B - (H - B - 8) * y / ymax;
  g.strokeStyle = "#ccd"; g.beginPath(); g.moveTo(L, 4); g.lineTo(L, H - B); g.lineTo(W - 4, H - B); g.stroke();
  g.fillText(ymax.toFixed(ymax < 10 ? 1 : 0) + " " + yunit, 2, 12);
  g.fillText("0", L - 10, H - B);
  g.fillText(xmax.toFixed(0) + " " + xunit, W - 40, H - 6);
  g.strokeStyle = "#1d6fb8"; g.lineWidth = 2; g.beginPath();
  pts.forEach((p, i) => {
    if (i === 0) { g.moveTo(X(p[0]), Y(p[1])); return; }
    if (steps) g.lineTo(X(p[0]), Y(pts[i - 1][1]));
    g.lineTo(X(p[0]), Y(p[1]));
  });
  g.stroke();
}
