package membership

import (
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func TestNBDAddr(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		want  string
	}{
		{[]string{"10.0.0.1", "http://10.0.0.1:8080", NBDAddrEntry("10.0.0.1:10809")}, "10.0.0.1:10809"},
		{[]string{"10.0.0.1", "http://10.0.0.1:8080"}, ""},
		{[]string{"nbd://10.0.0.1", "nbd://[fd00::1]:10809"}, "[fd00::1]:10809"},
		{nil, ""},
	} {
		if got := NBDAddr(inventory.ServerInfo{Addrs: tc.addrs}); got != tc.want {
			t.Errorf("NBDAddr(%q) = %q, want %q", tc.addrs, got, tc.want)
		}
	}
}
