package boots

import (
	"net"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(func() time.Time { return clock })
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	step := func(d time.Duration) { clock = clock.Add(d) }

	if _, ok := tr.Complete(mac); ok {
		t.Fatal("complete without a boot")
	}
	tr.DHCPSeen(mac) // firmware
	step(10 * time.Second)
	tr.DHCPSeen(mac) // iPXE: same boot
	step(20 * time.Second)
	tr.DHCPSeen(mac) // Linux: same boot
	step(5 * time.Second)
	if took, ok := tr.Complete(mac); !ok || took != 35*time.Second {
		t.Fatalf("took %v %v, want 35s", took, ok)
	}
	if _, ok := tr.Complete(mac); ok {
		t.Fatal("second DoneURL call must not report a boot")
	}
	step(time.Minute)
	tr.DHCPSeen(mac) // next boot
	step(StaleAfter + time.Second)
	tr.DHCPSeen(mac) // the previous one hung: a new boot starts here
	step(3 * time.Second)
	if took, _ := tr.Complete(mac); took != 3*time.Second {
		t.Fatalf("after stale boot took %v, want 3s", took)
	}
}
