package rootdisk

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestAuthenticate: the root export of a machine's current boot proves
// that machine, from its leased address, and nothing else does.
func TestAuthenticate(t *testing.T) {
	m, img := baseServer(t, testBaseKey, baseContent)
	a, _ := net.ParseMAC("52:54:00:00:00:01")
	b, _ := net.ParseMAC("52:54:00:00:00:02") // leased 10.0.0.2
	issue := func(mac net.HardwareAddr, overlay string) string {
		t.Helper()
		is, err := m.IssueBoot(mac, img, overlay)
		if err != nil {
			t.Fatal(err)
		}
		return is.Root[strings.LastIndex(is.Root, ":")+1:]
	}
	from := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }
	oldA := issue(a, "ephemeral")
	expA := issue(a, "ephemeral") // a new boot voids the old export
	expB := issue(b, "ephemeral")
	if _, err := m.Authenticate(expB, from("10.0.0.9")); err == nil || !strings.Contains(err.Error(), "not the machine's DHCP lease") {
		t.Fatalf("B's current export from A's address: %v, want refused for the address", err)
	}
	if got, err := m.Authenticate(expB, from("10.0.0.2")); err != nil || got.String() != b.String() {
		t.Fatalf("B's current export from its lease: %v, %v; want %v", got, err, b)
	}
	baseB := issue(b, "client-ram") // voids expB
	_, secretB, _ := ParseExportName(expB)
	for _, tt := range []struct {
		name, export, from string
		want               net.HardwareAddr // nil: refused
		reason             string
	}{
		{"own export", expA, "10.0.0.9", a, ""},
		{"own base export from its lease", baseB, "10.0.0.2", b, ""},
		{"previous boot's export", oldA, "10.0.0.9", nil, "wrong secret"},
		{"B's export after its next boot", expB, "10.0.0.2", nil, "no boot issued"},
		{"B's base export from A's address", baseB, "10.0.0.9", nil, "not the machine's DHCP lease"},
		{"A's MAC with B's secret", ExportName(a, secretB), "10.0.0.9", nil, "wrong secret"},
		{"forged base tag", strings.Replace(baseB, "52-54-00-00-00-02", "52-54-00-00-00-01", 1), "10.0.0.9", nil, "wrong tag"},
		{"not a name", "debian", "10.0.0.9", nil, "malformed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Authenticate(tt.export, from(tt.from))
			if tt.want != nil {
				if err != nil || got.String() != tt.want.String() {
					t.Fatalf("Authenticate = %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrNotAuthentic) || got != nil {
				t.Fatalf("Authenticate = %v, %v; want ErrNotAuthentic", got, err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("error %q does not say %q", err, tt.reason)
			}
		})
	}
}
