package mcast

import (
	"net"
	"testing"
	"time"
)

// stampedPair is a loopback socket stamping its datagrams, with a
// receive buffer of readBuffer bytes (0: the system's), and a socket
// connected to it; both closed when t ends.
func stampedPair(t *testing.T, readBuffer int) (c, out *net.UDPConn) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if readBuffer > 0 {
		if err := c.SetReadBuffer(readBuffer); err != nil {
			t.Fatal(err)
		}
	}
	if err := stampDatagrams(c); err != nil {
		t.Fatal(err)
	}
	if out, err = net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return c, out
}

// TestReadStampedSaysWhenADatagramArrived: a datagram read 200 ms after
// it arrived is stamped with its arrival, not with the read, and the
// read allocates nothing.
func TestReadStampedSaysWhenADatagramArrived(t *testing.T) {
	c, out := stampedPair(t, 0)
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
	var got arrival
	var err error
	allocs := testing.AllocsPerRun(1, func() { n, got, err = readStamped(c, buf, oob) })
	if err != nil || n != 5 {
		t.Fatalf("read %d bytes, %v; want 5", n, err)
	}
	arrived := got.at
	if age := time.Since(arrived); arrived.Before(sent.Add(-time.Millisecond)) || age < late {
		t.Fatalf("datagram sent at %v stamped %v (%v before now), want its arrival, at least %v before the read", sent, arrived, age, late)
	}
	if allocs != 0 {
		t.Fatalf("readStamped allocated %v times a read", allocs)
	}
}

// TestReadStampedCountsOverflow: a socket with a small receive buffer,
// sent more than it holds before it is read, says in the first datagram
// it queues after the drops how many it dropped (the count is taken at
// enqueue), and what was read and what was dropped add up to what was
// sent.
func TestReadStampedCountsOverflow(t *testing.T) {
	c, out := stampedPair(t, 4096)
	const sent = 200
	payload := make([]byte, 1200)
	for range sent {
		if _, err := out.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	buf, oob := make([]byte, 2048), make([]byte, stampSpace)
	read, dropped := 0, uint32(0)
	drain := func() {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			_, got, err := readStamped(c, buf, oob)
			if err != nil {
				return
			}
			if got.dropped < dropped {
				t.Fatalf("drop count went from %d to %d", dropped, got.dropped)
			}
			read, dropped = read+1, got.dropped
		}
	}
	drain()
	if dropped != 0 {
		t.Fatalf("the datagrams queued before the drops say %d dropped, want 0", dropped)
	}
	// One more, queued after the drops, carries their count.
	if _, err := out.Write(payload); err != nil {
		t.Fatal(err)
	}
	drain()
	if read < 2 || dropped == 0 || read+int(dropped) != sent+1 {
		t.Fatalf("read %d datagrams, the socket said it dropped %d; want both above 0, adding up to the %d sent", read, dropped, sent+1)
	}
	t.Logf("a 4 KiB buffer held %d of %d datagrams and counted %d dropped", read, sent, dropped)
}
