package wol

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestSendDirected sends to a directed address (the loopback one, which
// any host has) and decodes what arrives.
func TestSendDirected(t *testing.T) {
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pwd := []byte{1, 2, 3, 4, 5, 6}
	err = Send(ctx, Target{MAC: pc, Password: pwd, Broadcast: net.IPv4(127, 0, 0, 1), Port: l.LocalAddr().(*net.UDPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, _, err := l.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode(buf[:n])
	if err != nil || p.MAC.String() != pc.String() || string(p.Password) != string(pwd) {
		t.Fatalf("received %+v, %v; want the packet for %s with its password", p, err, pc)
	}
}

func TestSendNeedsAWay(t *testing.T) {
	err := Send(context.Background(), Target{MAC: pc})
	if err == nil {
		t.Fatal("Send with neither interface nor broadcast succeeded; want an error naming both")
	}
}
