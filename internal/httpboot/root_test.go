package httpboot

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

type fakeRoots struct{ calls int }

func (f *fakeRoots) IssueRoot(_ context.Context, mac net.HardwareAddr, root inventory.Root) (RootBoot, error) {
	f.calls++
	if root.Image == "gone" {
		return RootBoot{}, errors.New("no image named gone")
	}
	b := RootBoot{Arg: "nbd:10.0.0.1:10809:m-" + strings.ReplaceAll(mac.String(), ":", "-") + "-secret" + root.Overlay,
		Image: root.Image, SHA256: strings.Repeat(root.Image[:1], 64)}
	if inventory.ClientOverlay(root.Overlay) {
		b.Args = "bootfleet.overlay=" + root.Overlay
	}
	return b, nil
}

type noClock struct{}

func (noClock) Complete(net.HardwareAddr) (time.Duration, bool) { return 0, false }

// TestRootCmdline: a profile with a root gets bootfleet.root= appended,
// once, whether or not its template uses {{ .Root }}.
func TestRootCmdline(t *testing.T) {
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"auto":  {Name: "auto", Kernel: "/k", Cmdline: "console=ttyS0", Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayPersistent}},
			"templ": {Name: "templ", Kernel: "/k", Cmdline: "root=/dev/nbd0 agent={{ .Root }}", Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}},
			"plain": {Name: "plain", Kernel: "/k", Cmdline: "quiet"},
			"gone":  {Name: "gone", Kernel: "/k", Root: inventory.Root{Image: "gone", Overlay: inventory.OverlayEphemeral}},
			"ram":   {Name: "ram", Kernel: "/k", Cmdline: "quiet", Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayClientRAM}},
		},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "auto"), enrolled("52:54:00:00:00:02", "", "templ"),
			enrolled("52:54:00:00:00:03", "", "plain"), enrolled("52:54:00:00:00:04", "", "gone"), enrolled("52:54:00:00:00:05", "", "ram")},
	})
	roots := &fakeRoots{}
	srv := httptest.NewServer(New(Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.1:8080", Roots: roots}))
	defer srv.Close()
	tests := []struct {
		mac, want string
		status    int
	}{
		{"52-54-00-00-00-01", " console=ttyS0 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-00-00-01-secretpersistent || goto failed\n", 200},
		{"52-54-00-00-00-02", " root=/dev/nbd0 agent=nbd:10.0.0.1:10809:m-52-54-00-00-00-02-secretephemeral || goto failed\n", 200},
		{"52-54-00-00-00-03", "?mac=52-54-00-00-00-03 quiet || goto failed\n", 200},
		{"52-54-00-00-00-04", "no image named gone", 500},
		{"52-54-00-00-00-05", " quiet bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-00-00-05-secretclient-ram bootfleet.overlay=client-ram || goto failed\n", 200},
	}
	for _, tt := range tests {
		t.Run(tt.mac, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/ipxe/" + tt.mac)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Fatalf("got %d %q, want %d and %q", resp.StatusCode, b, tt.status, tt.want)
			}
		})
	}
	if resp, err := http.Head(srv.URL + "/ipxe/52-54-00-00-00-01"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD of a root script: %v %v", resp, err)
	}
	if roots.calls != 4 {
		t.Fatalf("IssueRoot called %d times, want 4 (once per GET of a script of a profile with a root, never for HEAD)", roots.calls)
	}
}

type noMilestones struct{}

func (noMilestones) Milestone(net.HardwareAddr, string, string) {}

// TestRootCmdlineMilestones: with telemetry on, the diskless agent is told
// where to report its steps.
func TestRootCmdlineMilestones(t *testing.T) {
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{"auto": {Name: "auto", Kernel: "/k", Cmdline: "console=ttyS0",
			Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}}},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "", "auto")},
	})
	srv := httptest.NewServer(New(Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.1:8080", Roots: &fakeRoots{}, Milestones: noMilestones{},
		IdentityURL: "http://10.0.0.1:8080/identity"}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ipxe/52-54-00-00-00-01")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// And where to fetch the machine's identity.
	if want := " bootfleet.milestones=http://10.0.0.1:8080/milestone/52-54-00-00-00-01 bootfleet.identity=http://10.0.0.1:8080/identity || goto failed"; !strings.Contains(string(b), want) {
		t.Fatalf("script lacks %q:\n%s", want, b)
	}
}
