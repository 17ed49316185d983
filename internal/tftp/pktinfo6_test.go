package tftp

import (
	"net"
	"testing"
)

// TestRequestReaderIPv6Dst: on an IPv6 socket bound to [::] the reader
// reports the address each request was sent to, so the transfer answers
// from it rather than from whichever address the kernel would pick.
func TestRequestReaderIPv6Dst(t *testing.T) {
	conn, err := net.ListenPacket("udp6", "[::]:0")
	if err != nil {
		t.Fatalf("listen on [::]: %v (the test needs IPv6 on loopback)", err)
	}
	defer conn.Close()
	c, err := net.DialUDP("udp6", nil, &net.UDPAddr{IP: net.IPv6loopback, Port: conn.LocalAddr().(*net.UDPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	n, local, _, err := newRequestReader(conn).ReadRequest(make([]byte, 16))
	if err != nil || n != 1 {
		t.Fatalf("ReadRequest = %d, %v", n, err)
	}
	if !local.Equal(net.IPv6loopback) {
		t.Fatalf("request to [::1] read with local address %v, want ::1", local)
	}
}
