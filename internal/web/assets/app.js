// bootfleet dashboard: polls the REST API every 2 s. No dependencies.
"use strict";
const API = "/api/v1";
const $ = (s) => document.querySelector(s);
let selected = null; // boot ID shown in the timeline
let profiles = [];

function token() { return localStorage.getItem("bootfleet-token") || ""; }

async function call(method, path, body) {
  const h = {};
  if (token()) h["Authorization"] = "Bearer " + token();
  if (body !== undefined) h["Content-Type"] = "application/json";
  const r = await fetch(API + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await r.json(); } catch (e) { /* empty body */ }
  if (!r.ok) {
    const err = new Error((data && data.error) || r.status + " " + r.statusText);
    err.status = r.status;
    throw err;
  }
  return data;
}

function banner(id, text) {
  const el = $(id);
  el.textContent = text || "";
  el.hidden = !text;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function fmtTime(s) {
  if (!s) return "-";
  return new Date(s).toLocaleString();
}
function secs(v) { return v ? v.toFixed(2) + " s" : "-"; }
function bytes(n) {
  if (!n) return "-";
  if (n < 1024) return n + " B";
  if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1048576).toFixed(1) + " MiB";
}

async function refresh() {
  let machines, boots;
  try {
    [machines, boots] = await Promise.all([call("GET", "/machines"), call("GET", "/boots?limit=500")]);
  } catch (e) {
    if (e.status === 401) {
      banner("#auth", token()
        ? "The API token was refused: " + e.message + ". Paste the current token from the server's data directory (api-token)."
        : "API token required: this server does not open reads (api.open_reads is false). Paste the token from the server's data directory (api-token) above.");
    } else {
      banner("#auth", "Cannot reach the API: " + e.message);
    }
    return;
  }
  banner("#auth", "");
  if (!profiles.length) {
    try { profiles = ((await call("GET", "/profiles")).profiles || []).map((p) => p.name); } catch (e) { /* names only */ }
  }
  try { renderServers((await call("GET", "/servers")).servers || []); } catch (e) { /* the machines still show */ }
  try {
    const [imgs, profs] = await Promise.all([call("GET", "/images"), call("GET", "/profiles")]);
    renderImages(imgs.images || [], profs.profiles || [], machines.machines || []);
    const lists = await Promise.all((imgs.images || []).map((i) => call("GET", "/images/" + encodeURIComponent(i.name) + "/versions")));
    renderVersions((imgs.images || []).map((i, n) => [i.name, lists[n].versions || []]), machines.machines || []);
  } catch (e) { /* the machines still show */ }
  const list = boots.boots || [];
  renderFleet(machines.machines || [], list);
  renderBoots(list);
  renderStorm(list, machines.machines || []);
  if (selected) {
    const b = list.find((x) => x.id === selected);
    if (b) renderTimeline(b);
  } else if (list.length) {
    selected = list[0].id;
    renderTimeline(list[0]);
  }
  $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
}

// The servers sharing the inventory: live, stale (no heartbeat for 30 s)
// or stopped, as the answering server judges by its clock.
function renderServers(servers) {
  const tb = $("#servers tbody");
  tb.replaceChildren();
  for (const s of servers) {
    const tr = el("tr");
    tr.dataset.name = s.name;
    const age = Math.round((Date.now() - Date.parse(s.heartbeat)) / 1000);
    tr.append(el("td", s.name), el("td", s.status, "status-" + s.status), el("td", s.version || "-"),
      el("td", (s.addrs || []).join(", ") || "-"), el("td", String(s.tftp_transfers)), el("td", String(s.nbd_sessions)),
      el("td", s.bytes_per_sec ? bytes(s.bytes_per_sec) + "/s" : "-"), el("td", fmtTime(s.heartbeat) + " (" + age + " s ago)"));
    tb.append(tr);
  }
}

// The fleet's images: their content, the servers holding it (with their
// status) and the machines whose profile roots them on it. A machine
// with no profile of its own (the default profile) is not counted.
function renderImages(images, profs, machines) {
  const root = {};
  for (const p of profs) if (p.root_image) root[p.name] = p.root_image;
  const tb = $("#images tbody");
  tb.replaceChildren();
  for (const img of images) {
    const tr = el("tr");
    tr.dataset.image = img.name;
    const sha = el("td", img.sha256.slice(0, 12), "sha");
    sha.title = img.sha256;
    const held = el("td", null, "held");
    for (const s of img.servers || []) held.append(el("span", s.name, "status-" + s.status), " ");
    if (!(img.servers || []).length) held.textContent = "none yet";
    const booting = machines.filter((m) => m.profile && root[m.profile] === img.name).map((m) => m.name || m.mac);
    tr.append(el("td", img.name), sha, el("td", bytes(img.size)), el("td", fmtTime(img.imported)), held,
      el("td", booting.join(", ") || "-", "booted"));
    tb.append(tr);
  }
}

// Each image's versions: state (the current production one marked, a
// maintenance one with its machine), what it stores, who made it, the
// profiles and machines whose channel boots it next, and the machines
// of the answering server reading it now (a persistent one holds it).
function renderVersions(perImage, machines) {
  const names = {};
  for (const m of machines) if (m.name) names[m.mac] = m.name;
  const who = (mac) => names[mac] ? names[mac] + " (" + mac + ")" : mac;
  const tb = $("#versions tbody");
  tb.replaceChildren();
  for (const [image, versions] of perImage) {
    for (const v of versions.slice().reverse()) { // newest first
      const tr = el("tr");
      tr.dataset.image = image;
      tr.dataset.version = String(v.version);
      let state = v.state + (v.current ? ", current" : "");
      if (v.state === "maintenance" && v.machine) state += ": " + who(v.machine);
      if (v.commit) state += v.commit.error ? " (commit failed: " + v.commit.error + ")"
        : " (committing: " + Math.floor(100 * v.commit.done / (v.commit.total || 1)) + "%)";
      const next = [...(v.profiles || []).map((p) => "profile " + p), ...(v.channel_machines || []).map((m) => "machine " + m)];
      const now = (v.machines || []).map((m) => who(m.mac) + (m.persistent ? " (persistent)" : ""));
      tr.append(el("td", image), el("td", String(v.version) + (v.parent ? " (over " + v.parent + ")" : "")),
        el("td", state, "state-" + v.state), el("td", bytes(v.stored)), el("td", (v.by || "-") + ", " + fmtTime(v.made)),
        el("td", next.join(", ") || "-", "next"), el("td", now.join(", ") || "-", "now"));
      tb.append(tr);
    }
  }
}

function renderFleet(machines, boots) {
  const latest = {};
  for (const b of boots) if (!latest[b.mac]) latest[b.mac] = b; // newest first
  const tb = $("#fleet tbody");
  // Keep a row whose profile menu is open, so polling does not close it.
  if (tb.contains(document.activeElement) && document.activeElement.tagName === "SELECT") return;
  tb.replaceChildren();
  for (const m of machines) {
    const tr = el("tr");
    tr.dataset.mac = m.mac;
    tr.append(el("td", m.name ? m.name + " (" + m.mac + ")" : m.mac));
    const sel = el("select");
    sel.setAttribute("aria-label", "profile of " + m.mac);
    for (const p of new Set([m.profile || "", ...profiles])) {
      const o = el("option", p || "(default)");
      o.value = p;
      sel.append(o);
    }
    sel.value = m.profile || "";
    const ptd = el("td");
    ptd.append(sel);
    tr.append(ptd);
    tr.append(el("td", m.state || "-", "state-" + (m.state || "")));
    tr.append(el("td", fmtTime(m.last_boot)));
    const b = latest[m.mac];
    tr.append(el("td", b ? (b.state === "complete" ? secs(b.summary.total_seconds) : b.state) : "-"));
    const act = el("td");
    const apply = el("button", "Set profile");
    apply.onclick = () => action(() => call("PATCH", "/machines/" + encodeURIComponent(m.mac), { profile: sel.value }),
      "Profile of " + m.mac + " set to " + (sel.value || "(default)") + "; it applies from the next boot.");
    const reset = el("button", "Reset overlay");
    reset.onclick = () => action(() => call("POST", "/machines/" + encodeURIComponent(m.mac) + "/reset"),
      "Overlay of " + m.mac + " reset.");
    act.append(apply, " ", reset);
    tr.append(act);
    tb.append(tr);
  }
}

async function action(fn, ok) {
  if (!token()) {
    banner("#msg", "");
    banner("#auth", "Actions need the API token: paste it from the server's data directory (api-token) above, then try again.");
    return;
  }
  try {
    await fn();
    banner("#msg", ok);
    refresh();
  } catch (e) {
    let text = "Failed: " + e.message;
    if (e.status === 401) text = "The API token was refused: " + e.message;
    if (e.status === 409) text = "Refused: " + e.message;
    banner("#msg", text);
  }
}

function renderBoots(boots) {
  const tb = $("#boots tbody");
  tb.replaceChildren();
  for (const b of boots.slice(0, 50)) {
    const tr = el("tr");
    tr.dataset.id = b.id;
    if (b.id === selected) tr.className = "selected";
    const s = b.summary;
    tr.append(el("td", b.mac), el("td", fmtTime(b.start)), el("td", b.state, "state-" + b.state),
      el("td", secs(s.dhcp_seconds)), el("td", secs(s.download_seconds) + " / " + bytes(s.download_bytes)),
      el("td", s.download_bytes ? s.download_mbps.toFixed(2) : "-"),
      el("td", b.state === "complete" ? secs(s.total_seconds) : b.state));
    tr.onclick = () => { selected = b.id; renderTimeline(b); renderBoots(boots); };
    tb.append(tr);
  }
}

function renderTimeline(b) {
  const box = $("#timeline");
  box.dataset.boot = b.id;
  box.dataset.mac = b.mac;
  $("#tl-title").textContent = b.mac + ", " + fmtTime(b.start) + ", " + b.state + (b.reason ? " (" + b.reason + ")" : "") +
    (b.servers ? ", served by " + b.servers.join(", ") : "");
  const end = b.phases.reduce((m, p) => Math.max(m, p.offset_seconds + p.seconds), 0) || 1;
  box.replaceChildren();
  for (const p of b.phases) {
    const row = el("div", null, "row");
    // Profile files carry their server path; the base name reads better.
    const label = el("div", "+" + p.offset_seconds.toFixed(2) + "s " + p.name.replace(/ \S*\//, " "), "label");
    label.title = p.name;
    row.append(label);
    const track = el("div", null, "track");
    const bar = el("div", null, "bar " + p.kind);
    bar.dataset.phase = p.name;
    bar.style.left = (100 * p.offset_seconds / end) + "%";
    if (p.kind !== "milestone" && p.kind !== "complete") bar.style.width = (100 * p.seconds / end) + "%";
    bar.title = p.name + ": " + p.seconds.toFixed(2) + " s" + (p.bytes ? ", " + bytes(p.bytes) + ", " + p.mbps.toFixed(2) + " MB/s" : "");
    track.append(bar);
    row.append(track);
    let info = p.kind === "milestone" || p.kind === "complete" ? "" : p.seconds.toFixed(2) + " s";
    if (p.bytes) info += ", " + bytes(p.bytes) + ", " + p.mbps.toFixed(2) + " MB/s";
    // A boot several servers served says which served each phase.
    if (b.servers && p.server) info += (info ? ", " : "") + "from " + p.server;
    row.append(el("div", info, "info"));
    box.append(row);
  }
}

$("#tokenform").onsubmit = (ev) => {
  ev.preventDefault();
  const v = $("#token").value.trim();
  if (v) localStorage.setItem("bootfleet-token", v);
  $("#token").value = "";
  $("#token").placeholder = v ? "token saved" : "contents of DATA/api-token";
  refresh();
};
$("#forget").onclick = () => { localStorage.removeItem("bootfleet-token"); $("#token").placeholder = "contents of DATA/api-token"; refresh(); };
if (token()) $("#token").placeholder = "token saved";
refresh();
setInterval(refresh, 2000);
