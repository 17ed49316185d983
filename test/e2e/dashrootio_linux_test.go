package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/bootfleet/bootfleet/internal/agent"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// TestDashboardRootIO: the storm view, in headless chromium, sums how
// the storm's diskless roots arrived and lists each machine, so an admin
// sees which one fell back to unicast. Four machines start a boot with a
// PXE DISCOVER from a client namespace, then report their root proxy's
// counters to the milestone endpoint with the agent's own encoding, as
// its report loop does: one whose group worked (it reports twice; only
// its later counters count), one on a network that drops the group
// (silent), one that lost too much (lossy), and one with no group. No VM
// boots.
func TestDashboardRootIO(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	startBootfleetConfig(t, e, lan, dir, dashRootIOConfig, map[string]string{"Data": t.TempDir()})
	client := lan.addPeer(t, "10.213.0.250"+prefix)

	const MiB = 1 << 20
	machines := []struct {
		mac, name string
		reports   []rootproxy.Stats // in the order sent; the last counts
	}{
		{"52:54:00:d5:00:01", "lab-on", []rootproxy.Stats{
			{MulticastBytes: 10 * MiB, UnicastBytes: 1 * MiB, HitBytes: 8 * MiB, MissBytes: 3 * MiB, Lost: 2, Repairs: 2, Multicast: "on"},
			{MulticastBytes: 90 * MiB, UnicastBytes: 2 * MiB, HitBytes: 150 * MiB, MissBytes: 6 * MiB, Lost: 12, Repairs: 9, Multicast: "on"},
		}},
		{"52:54:00:d5:00:02", "lab-silent", []rootproxy.Stats{
			{UnicastBytes: 60 * MiB, MissBytes: 60 * MiB, HitBytes: 4 * MiB, Fallbacks: 3, Multicast: "silent"},
		}},
		{"52:54:00:d5:00:03", "lab-lossy", []rootproxy.Stats{
			{MulticastBytes: 20 * MiB, UnicastBytes: 40 * MiB, HitBytes: 30 * MiB, MissBytes: 50 * MiB, Fallbacks: 17, Lost: 900, Repairs: 310, Multicast: "lossy"},
		}},
		{"52:54:00:d5:00:04", "", []rootproxy.Stats{
			{UnicastBytes: 5 * MiB, MissBytes: 5 * MiB, Multicast: "off"},
		}},
	}

	// The client's new veth sends nothing until the kernel's link watch
	// activates its queue, up to a second after it is up: a UDP datagram
	// sent before then is dropped with no error, a TCP SYN is sent again.
	// So one HTTP request from there shows the link carries frames.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) { return dialIn(client.name, addr) }}}
	linkStart := time.Now()
	if resp, err := hc.Get("http://" + serverIP + ":8080/ui/app.css"); err != nil {
		t.Fatalf("the server from the client namespace: %v", err)
	} else {
		resp.Body.Close()
	}
	t.Logf("client namespace reached the server in %v", time.Since(linkStart).Round(time.Millisecond))

	// A PXE DISCOVER is what opens a boot record on a lone server.
	dhcp := newDHCPClient(t, client)
	var discovers []*dhcpv4.DHCPv4
	for _, m := range machines {
		mac, _ := net.ParseMAC(m.mac)
		d, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithBroadcast(true),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003016")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)))
		if err != nil {
			t.Fatal(err)
		}
		discovers = append(discovers, d)
	}
	for i, offers := range dhcp.send(t, discovers, 15*time.Second) {
		if len(offers) == 0 {
			t.Fatalf("%s: no OFFER to its PXE DISCOVER; links:\nclient: %s\nlan: %s", machines[i].mac,
				client.out(t, "ip", "-s", "link", "show", "eth0"), lan.out(t, "ip", "-s", "link"))
		}
	}

	// The reports come from the client namespace, as an agent's would.
	for _, m := range machines {
		for _, st := range m.reports {
			u := "http://" + serverIP + ":8080/milestone/" + strings.ReplaceAll(m.mac, ":", "-") + "/" +
				agent.RootIOMilestone + "?" + agent.RootIOQuery(st)
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatalf("GET %s: %v", u, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s %s", u, resp.Status, body)
			}
		}
	}

	web := proxyInto(t, lan, serverIP+":8080")
	token := apiToken(t, dir)
	ctx := startBrowser(t, 90*time.Second)
	// The summary is drawn from the same poll as the rows; wait for all.
	ready := `#storm-root[data-machines="4"]`
	err := openDashboard(ctx, web, token, chromedp.WaitReady(ready))
	screenshot(ctx, dir, "dashboard-rootio.png")
	if err != nil {
		t.Fatalf("dashboard at %s: no %s: %v", web, ready, err)
	}

	sum, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`Object.assign({}, document.querySelector("#storm-root").dataset)`))
	if err != nil {
		t.Fatal(err)
	}
	// The sums of the last reports: 90+0+20+0 MiB by multicast against
	// 2+60+40+5 by unicast.
	for k, want := range map[string]string{
		"multicastBytes": fmt.Sprint(110 * MiB), "unicastBytes": fmt.Sprint(107 * MiB), "multicastShare": "50.7",
		"hitBytes": fmt.Sprint(184 * MiB), "missBytes": fmt.Sprint(121 * MiB), "fallbacks": "20",
		"lost": "912", "repairs": "319",
		"groupsOn": "1", "groupsSilent": "1", "groupsLossy": "1", "groupsOff": "1",
	} {
		if sum[k] != want {
			t.Errorf("#storm-root data-%s = %q, want %q", k, sum[k], want)
		}
	}
	text, err := chromedp.Run(ctx, chromedp.Text(`#storm-root`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"110.0 MiB by multicast", "107.0 MiB by unicast", "(50.7% by multicast)",
		"20 fallbacks", "912 datagrams lost, 319 repairs asked", "1 on, 1 silent, 1 lossy, 1 off"} {
		if !strings.Contains(text, want) {
			t.Errorf("storm root summary %q lacks %q", text, want)
		}
	}

	// One row per machine, the ones whose group gave up first.
	type row struct {
		MAC, Group, Text                            string
		Multicast, Unicast, Hits, Misses, Fallbacks string
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]row](`[...document.querySelectorAll("#storm-machines tbody tr")].map((r) => ({
		MAC: r.dataset.mac, Group: r.dataset.group, Text: r.textContent, Multicast: r.dataset.multicast,
		Unicast: r.dataset.unicast, Hits: r.dataset.hits, Misses: r.dataset.misses, Fallbacks: r.dataset.fallbacks}))`))
	if err != nil {
		t.Fatal(err)
	}
	order := []int{2, 1, 3, 0} // lossy, silent, off, on
	if len(rows) != len(order) {
		t.Fatalf("storm table has %d rows %+v, want %d", len(rows), rows, len(order))
	}
	for i, mi := range order {
		m, got := machines[mi], rows[i]
		st := m.reports[len(m.reports)-1]
		want := row{MAC: m.mac, Group: st.Multicast, Multicast: fmt.Sprint(st.MulticastBytes), Unicast: fmt.Sprint(st.UnicastBytes),
			Hits: fmt.Sprint(st.HitBytes), Misses: fmt.Sprint(st.MissBytes), Fallbacks: fmt.Sprint(st.Fallbacks)}
		want.Text = got.Text
		if got != want {
			t.Errorf("storm row %d = %+v, want %+v", i, got, want)
		}
		label := m.mac
		if m.name != "" {
			label = m.name + " (" + m.mac + ")"
		}
		if !strings.HasPrefix(got.Text, label) {
			t.Errorf("storm row %d reads %q, want it to start with %q", i, got.Text, label)
		}
	}
	if !strings.Contains(rows[0].Text, "900 / 310") || !strings.HasSuffix(rows[2].Text, "-") {
		t.Errorf("lost / repairs: lossy row %q, want 900 / 310; off row %q, want -", rows[0].Text, rows[2].Text)
	}
	t.Logf("storm root I/O: %s", text)

	// /metrics counts each report's increase over the machine's last, so
	// its totals are the dashboard's.
	resp, err := http.Get(web + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	// counter is the series of name with label=value, or its only one.
	counter := func(name, label, value string) float64 {
		for _, m := range fams[name].GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == label && l.GetValue() == value
			}) {
				return m.GetCounter().GetValue()
			}
		}
		return -1
	}
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{
		{"bootfleet_root_bytes_total", "via", "multicast", 110 * MiB},
		{"bootfleet_root_bytes_total", "via", "unicast", 107 * MiB},
		{"bootfleet_root_cache_bytes_total", "result", "hit", 184 * MiB},
		{"bootfleet_root_cache_bytes_total", "result", "miss", 121 * MiB},
		{"bootfleet_root_fallbacks_total", "", "", 20},
		{"bootfleet_root_groups_given_up_total", "state", "silent", 1},
		{"bootfleet_root_groups_given_up_total", "state", "lossy", 1},
	} {
		if got := counter(c.name, c.label, c.value); got != c.want {
			t.Errorf("/metrics %s{%s=%q} = %v, want %v as the dashboard shows", c.name, c.label, c.value, got, c.want)
		}
	}
}

var dashRootIOConfig = template.Must(template.New("dashrootio").Parse(`# generated by test/e2e (TestDashboardRootIO)
` + lanKeys + fullDHCPKeys + serviceKeys + `default_profile: ` + defaultProfile + `
profiles:
` + defaultProfileKeys + `machines:
  - {mac: "52:54:00:d5:00:01", name: lab-on}
  - {mac: "52:54:00:d5:00:02", name: lab-silent}
  - {mac: "52:54:00:d5:00:03", name: lab-lossy}
`))
