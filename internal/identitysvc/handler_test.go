package identitysvc

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

type leases map[string]net.IP

func (l leases) LeaseIP(mac net.HardwareAddr) (net.IP, bool) {
	ip, ok := l[mac.String()]
	return ip, ok
}

// TestHandlerRefusesIdentityTheft: over HTTP, with the real root export
// check, a machine gets its own identity with its own export from its
// own address, and neither B's export nor A's export from B's address
// gets A's; each refusal is logged, and no log line holds a key or an
// export secret.
func TestHandlerRefusesIdentityTheft(t *testing.T) {
	data := t.TempDir()
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	sum, size, err := blobs.Import(bytes.NewReader(bytes.Repeat([]byte("root"), 1024)))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := rootdisk.New(rootdisk.Config{Data: data, Blobs: blobs,
		Leases: leases{macA.String(): net.IPv4(127, 0, 0, 1), macB.String(): net.IPv4(127, 0, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	mgr.SetAddr("127.0.0.1", 10809)
	img := inventory.Image{Name: "debian", SHA256: sum, Size: size}
	export := func(mac net.HardwareAddr) string {
		is, err := mgr.IssueBoot(mac, img, "ephemeral")
		if err != nil {
			t.Fatal(err)
		}
		return is.Root[strings.LastIndex(is.Root, ":")+1:]
	}
	expA, expB := export(macA), export(macB)

	var logs bytes.Buffer
	svc := newService(t, newStore(t), newKey(t), slog.New(slog.NewTextHandler(&logs, nil)))
	srv := httptest.NewServer(svc.Handler(mgr))
	t.Cleanup(srv.Close)
	get := func(auth, query string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+Path+query, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, body := get(AuthScheme+" "+expA, "?ssh=1")
	if code != 200 {
		t.Fatalf("own identity: %d %s", code, body)
	}
	id, err := identity.Decode([]byte(body))
	if err != nil || id.HostName != "pc1" || len(id.HostKeys) != 3 {
		t.Fatalf("own identity: %+v, %v", id, err)
	}
	// The test client connects from 127.0.0.1, A's lease: B's export from
	// there is B's credential used from A's address.
	for _, tt := range []struct {
		name, auth string
		code       int
		log        string
	}{
		{"B's export from A's address", AuthScheme + " " + expB, 403, "not the machine's DHCP lease"},
		{"A's MAC with B's secret", AuthScheme + " " + strings.Replace(expB, "52-54-00-00-00-0b", "52-54-00-00-00-0a", 1), 403, "wrong secret"},
		{"no credential", "", 401, "no Authorization"},
		{"bearer token", "Bearer " + expA, 401, "no Authorization"},
	} {
		code, body := get(tt.auth, "?ssh=1")
		if code != tt.code || strings.Contains(body, "PRIVATE KEY") {
			t.Errorf("%s: %d %q, want %d and no key", tt.name, code, body, tt.code)
		}
		if !strings.Contains(logs.String(), tt.log) {
			t.Errorf("%s: no log line saying %q:\n%s", tt.name, tt.log, logs.String())
		}
	}
	if n := strings.Count(logs.String(), "identity request refused"); n != 4 {
		t.Errorf("%d refusals logged, want 4:\n%s", n, logs.String())
	}
	_, secretA, _ := rootdisk.ParseExportName(expA)
	_, secretB, _ := rootdisk.ParseExportName(expB)
	for _, k := range id.HostKeys {
		if strings.Contains(logs.String(), k.SecretLine()) {
			t.Fatalf("private %s key in the log", k.Type)
		}
	}
	if strings.Contains(logs.String(), secretA) || strings.Contains(logs.String(), secretB) {
		t.Fatalf("an export secret is in the log:\n%s", logs.String())
	}
}
