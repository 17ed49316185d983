package httpboot

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestReconnectMilestoneLogged: the server an agent moved its root to logs
// which machine, which export, from where and after how long; other
// milestones and unreadable times log no reconnect.
func TestReconnectMilestoneLogged(t *testing.T) {
	v := newView(t, machineview.Input{})
	var logs testutil.SyncBuffer
	srv := httptest.NewServer(New(Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.2:8080", Milestones: noMilestones{},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	defer srv.Close()
	for _, tc := range []struct {
		path, want string
	}{
		{"/milestone/52-54-00-00-00-01/nbd-reconnected-1234ms?from=10.0.0.1:10809&export=m-52-54-00-00-00-01-0123%E2%80%A6&after_ms=1234",
			`msg="machine's NBD root reconnected to this server" mac=52:54:00:00:00:01 export=m-52-54-00-00-00-01-0123… from=10.0.0.1:10809 after=1.234s`},
		{"/milestone/52-54-00-00-00-02/nbd-reconnected-xms", `msg="nbd reconnect reported with an unreadable time" mac=52:54:00:00:00:02`},
		{"/milestone/52-54-00-00-00-03/agent-switch-root", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := len(logs.String())
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %s, want 200", tc.path, resp.Status)
			}
			got := logs.String()[before:]
			if tc.want == "" && strings.Contains(got, "reconnect") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("log after GET %s:\n%s\nwant it to contain %q", tc.path, got, tc.want)
			}
		})
	}
}

type rootIOs struct {
	got []string
}

func (r *rootIOs) RootIO(mac net.HardwareAddr, q url.Values, _ string) error {
	if q.Get("group") == "bad" {
		return errors.New("root-io report: group=bad")
	}
	r.got = append(r.got, mac.String()+" "+q.Encode())
	return nil
}

// TestRootIOReport: a root proxy's report goes to the RootIO recorder,
// not into the boot's milestones; a malformed one gets 400.
func TestRootIOReport(t *testing.T) {
	v := newView(t, machineview.Input{})
	ms, rio := &milestones{}, &rootIOs{}
	srv := httptest.NewServer(New(Config{Fleet: v, Boots: noClock{}, BaseURL: "http://10.0.0.2:8080", Milestones: ms, RootIO: rio}))
	defer srv.Close()
	get := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/milestone/52-54-00-00-00-01/root-io?group=on&multicast=5"); code != 200 {
		t.Fatalf("report: %d, want 200", code)
	}
	if code := get("/milestone/52-54-00-00-00-01/root-io?group=bad"); code != 400 {
		t.Fatalf("malformed report: %d, want 400", code)
	}
	if len(rio.got) != 1 || rio.got[0] != "52:54:00:00:00:01 group=on&multicast=5" || len(ms.got) != 0 {
		t.Fatalf("root io %v, milestones %v: want the report kept and no milestone", rio.got, ms.got)
	}
}
