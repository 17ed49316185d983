package telemetry

import (
	"testing"
	"time"
)

// TestPowerCause: a boot that starts after a power command carries it,
// once; a boot long after one, or of another machine, does not.
func TestPowerCause(t *testing.T) {
	f := newFake(t, Config{})
	f.r.Powered(macA, "on", "api:admin")
	f.step(3 * time.Second)
	f.dora(macA, uefi)
	f.dora(macB, uefi)
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 || bs[0].Power == nil {
		t.Fatalf("boot after power on: %+v, want it to carry the command", bs)
	}
	if p := bs[0].Power; p.Action != "on" || p.Cause != "api:admin" || !p.Time.Equal(t0) || bs[0].Start.Sub(p.Time) != 3*time.Second {
		t.Fatalf("power cause %+v (boot start %v), want on by api:admin at %v, 3 s before", *p, bs[0].Start, t0)
	}
	if b := f.r.Boots(Filter{MAC: macB}); b[0].Power != nil {
		t.Fatalf("another machine's boot carries %+v", *b[0].Power)
	}
	// The next boot of the same machine is its own.
	f.done(macA)
	f.step(time.Minute)
	f.dora(macA, uefi)
	if bs := f.r.Boots(Filter{MAC: macA}); len(bs) != 2 || bs[0].Power != nil {
		t.Fatalf("second boot carries %+v; a command ties to one boot", *bs[0].Power)
	}
	// A command whose boot never came does not claim a much later one.
	f.r.Powered(macB, "cycle", "schedule:night")
	f.step(powerWindow + time.Second)
	f.dora(macB, uefi)
	if bs := f.r.Boots(Filter{MAC: macB}); bs[0].Power != nil {
		t.Fatalf("boot %s after the command carries it", powerWindow)
	}
}
