package inventorysvc

import (
	"net"
	"testing"
	"time"
)

func nthMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x52, 0x54, 0, byte(i >> 16), byte(i >> 8), byte(i)}
}

// readyNow reports whether b's channel is ready without waiting.
func readyNow(b *backlog, now time.Time) bool {
	select {
	case <-b.ready(now):
		return true
	default:
		return false
	}
}

// TestBacklogPace: one sighting per MAC waits; after a quiet spell a
// burst is written at once, then one every 1/recordRate seconds.
func TestBacklogPace(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	b := backlog{queued: map[string]bool{}}
	if b.ready(now) != nil {
		t.Fatal("an empty backlog is ready")
	}
	const queued = recordBurst + 5
	for i := range queued {
		b.push(sighting{mac: nthMAC(i), at: now})
		b.push(sighting{mac: nthMAC(i), at: now}) // a second DISCOVER of the same machine
	}
	if len(b.queue) != queued {
		t.Fatalf("queued %d sightings, want one per MAC (%d)", len(b.queue), queued)
	}
	burst := 0
	for ; readyNow(&b, now); burst++ {
		if s := b.pop(now); s.mac.String() != nthMAC(burst).String() {
			t.Fatalf("pop %d = %v, want the oldest, %v", burst, s.mac, nthMAC(burst))
		}
	}
	// pop lets one more through at the very instant the burst is spent.
	if burst < recordBurst || burst > recordBurst+1 {
		t.Fatalf("%d sightings written at once, want a burst of %d", burst, recordBurst)
	}
	if !readyNow(&b, now.Add(time.Second/recordRate)) {
		t.Fatal("the next sighting still waits one pace later")
	}
}

func TestBacklogBound(t *testing.T) {
	b := backlog{queued: map[string]bool{}}
	for i := range maxBacklog + 10 {
		b.push(sighting{mac: nthMAC(i)})
	}
	if len(b.queue) != maxBacklog {
		t.Fatalf("backlog holds %d, want at most %d", len(b.queue), maxBacklog)
	}
}
