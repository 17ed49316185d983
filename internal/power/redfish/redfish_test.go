package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
)

// bmc replays testdata/mockup, resources shaped like the DMTF's published
// Redfish mockups (public-rackmount1), and acts on resets the way a BMC
// does, so the driver is tested against a recorded exchange: every
// request it makes is written to log and compared with exchange.golden.
type bmc struct {
	mu    sync.Mutex
	state string
	log   []string
}

const user, pass = "admin", "rf-secret"

func (b *bmc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
		w.Header().Set("WWW-Authenticate", `Basic realm="bmc"`)
		http.Error(w, `{"error":{"code":"Base.1.0.GeneralError"}}`, http.StatusUnauthorized)
		return
	}
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = append(b.log, strings.TrimSpace(r.Method+" "+r.URL.Path+" "+string(body)))
	if r.Method == http.MethodPost {
		var in struct{ ResetType string }
		json.Unmarshal(body, &in)
		switch in.ResetType {
		case "On", "ForceOn", "ForceRestart", "GracefulRestart":
			b.state = "On"
		case "ForceOff", "GracefulShutdown":
			b.state = "Off"
		default:
			http.Error(w, `{"error":{"code":"Base.1.0.ActionParameterNotSupported"}}`, http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	p := filepath.Join("testdata", "mockup", filepath.FromSlash(strings.TrimSuffix(r.URL.Path, "/")), "index.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	var doc map[string]any
	json.Unmarshal(raw, &doc)
	if _, ok := doc["PowerState"]; ok {
		doc["PowerState"] = b.state
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc)
}

func target(host, password string) power.Target {
	return power.Target{Machine: inventory.Machine{MAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}},
		Settings: inventory.PowerSettings{Driver: "redfish", Host: host, User: user, Password: password}}
}

func TestRecordedExchange(t *testing.T) {
	b := &bmc{state: "Off"}
	srv := httptest.NewTLSServer(b)
	defer srv.Close()
	d := Driver{Transport: srv.Client().Transport, Poll: time.Millisecond}
	host := strings.TrimPrefix(srv.URL, "https://")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range []power.Action{power.Status, power.On, power.Cycle, power.Off} {
		st, err := d.Do(ctx, target(host, pass), a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		b.log = append(b.log, fmt.Sprintf("== %s: %s", a, st))
	}
	got := strings.Join(b.log, "\n") + "\n"
	golden := filepath.Join("testdata", "exchange.golden")
	if os.Getenv("UPDATE_TESTDATA") != "" {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, _ := os.ReadFile(golden)
	if got != string(want) {
		t.Fatalf("exchange:\n%s\nwant %s:\n%s", got, golden, want)
	}
}

func TestRefusals(t *testing.T) {
	b := &bmc{state: "On"}
	srv := httptest.NewTLSServer(b)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := Driver{Transport: srv.Client().Transport}.Do(ctx, target(host, "wrong"), power.Status)
	if err == nil || !strings.Contains(err.Error(), "wrong user or password") || strings.Contains(err.Error(), "wrong\"") {
		t.Errorf("wrong password: %v; want a refusal that says so", err)
	}
	// The test server's certificate is self-signed: refused unless insecure.
	_, err = Driver{}.Do(ctx, target(host, pass), power.Status)
	if err == nil || !strings.Contains(err.Error(), "set insecure") {
		t.Errorf("self-signed certificate: %v; want advice to set insecure", err)
	}
	tg := target(host, pass)
	tg.Settings.Insecure = true
	if st, err := (Driver{}).Do(ctx, tg, power.Status); err != nil || st != power.StateOn {
		t.Errorf("insecure: %q, %v; want on", st, err)
	}
	tg.Settings.Host = host + "/redfish/v1/Systems/437XR1138R2"
	if st, err := (Driver{}).Do(ctx, tg, power.Status); err != nil || st != power.StateOn {
		t.Errorf("system named in host: %q, %v; want on", st, err)
	}
	tg.Settings.Host = host + "/etc/passwd"
	if _, err := (Driver{}).Do(ctx, tg, power.Status); err == nil {
		t.Error("a host path outside /redfish/v1/ was accepted")
	}
	if _, err := pick([]string{"Nmi"}, resetTypes[power.Off]); err == nil {
		t.Error("pick found a ResetType the system does not allow")
	}

	// A silent BMC: the driver gives up by its context.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = Driver{}.Do(short, target(ln.Addr().String(), pass), power.Status)
	if err == nil || !strings.Contains(err.Error(), "no answer from the BMC") {
		t.Errorf("silent BMC: %v; want an error saying it did not answer", err)
	}
}

// FuzzDecode: no body makes a decoder panic, and no link it accepts
// leaves the service's /redfish/v1/ tree, where credentials would follow.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var links []string
		if r, err := DecodeServiceRoot(b); err == nil {
			links = append(links, r.Systems.ID)
		}
		if c, err := DecodeCollection(b); err == nil {
			for _, m := range c.Members {
				links = append(links, m.ID)
			}
		}
		if s, err := DecodeSystem(b); err == nil {
			links = append(links, s.Actions.Reset.Target)
		}
		if i := slices.IndexFunc(links, func(l string) bool { return !strings.HasPrefix(l, "/redfish/v1/") || strings.Contains(l, "//") }); i >= 0 {
			t.Fatalf("accepted link %q", links[i])
		}
	})
}
