package mcast

import (
	"net"
	"testing"
	"time"
)

// TestReadStampedSaysWhenADatagramArrived: a datagram read 200 ms after
// it arrived is stamped with its arrival, not with the read, and the
// read allocates nothing.
func TestReadStampedSaysWhenADatagramArrived(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := stampArrivals(c); err != nil {
		t.Fatal(err)
	}
	out, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	// The kernel turns receive timestamps on for the whole machine from a
	// work queue; a datagram it takes before then is stamped when read.
	time.Sleep(100 * time.Millisecond)
	buf, oob := make([]byte, 2048), make([]byte, stampSpace)
	const late = 200 * time.Millisecond
	sent := time.Now()
	// AllocsPerRun(1, ...) reads twice: once to warm up, once measured.
	for range 2 {
		if _, err := out.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(late)
	var n int
	var arrived time.Time
	allocs := testing.AllocsPerRun(1, func() { n, arrived, err = readStamped(c, buf, oob) })
	if err != nil || n != 5 {
		t.Fatalf("read %d bytes, %v; want 5", n, err)
	}
	if age := time.Since(arrived); arrived.Before(sent.Add(-time.Millisecond)) || age < late {
		t.Fatalf("datagram sent at %v stamped %v (%v before now), want its arrival, at least %v before the read", sent, arrived, age, late)
	}
	if allocs != 0 {
		t.Fatalf("readStamped allocated %v times a read", allocs)
	}
}
