package inventorysvc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/dhcp"
)

// TestLeaseIP: the NBD check sees a machine's live lease, and nothing for
// an expired lease or none.
func TestLeaseIP(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	l := NewLeases(st)
	now := time.Now()
	for _, le := range []dhcp.Lease{
		{MAC: mac("52:54:00:00:00:01"), IP: net.IPv4(10, 0, 0, 11), Expiry: now.Add(time.Hour)},
		{MAC: mac("52:54:00:00:00:02"), IP: net.IPv4(10, 0, 0, 12), Expiry: now.Add(-time.Minute)},
	} {
		if err := l.Put(context.Background(), le); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, mac string
		want      string // "" = no live lease
	}{
		{"live", "52:54:00:00:00:01", "10.0.0.11"},
		{"expired", "52:54:00:00:00:02", ""},
		{"none", "52:54:00:00:00:03", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ip, ok := l.LeaseIP(mac(tt.mac))
			if ok != (tt.want != "") || (ok && ip.String() != tt.want) {
				t.Fatalf("LeaseIP(%s) = %v, %v; want %q", tt.mac, ip, ok, tt.want)
			}
		})
	}
}
