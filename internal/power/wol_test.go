package power

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/wol"
)

func TestWOLDriver(t *testing.T) {
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := WOL{Port: l.LocalAddr().(*net.UDPAddr).Port}
	tg := Target{Machine: inventory.Machine{MAC: net.HardwareAddr{0x52, 0x54, 0, 0x12, 0x34, 0x56}},
		Settings: inventory.PowerSettings{Driver: "wol", Broadcast: net.IPv4(127, 0, 0, 1), SecureOn: "0a:0b:0c:0d:0e:0f"}}
	st, err := d.Do(context.Background(), tg, On)
	if err != nil || st != StateSent {
		t.Fatalf("on: %q, %v; want sent", st, err)
	}
	l.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 200)
	n, _, err := l.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := wol.Decode(buf[:n])
	if err != nil || p.MAC.String() != "52:54:00:12:34:56" || net.HardwareAddr(p.Password).String() != "0a:0b:0c:0d:0e:0f" {
		t.Fatalf("listener got %+v, %v; want the machine's packet with its SecureOn password", p, err)
	}
	for _, a := range []Action{Off, Cycle, Reset, Status} {
		if _, err := d.Do(context.Background(), tg, a); !errors.Is(err, ErrUnsupported) {
			t.Errorf("wol %s: %v, want ErrUnsupported", a, err)
		}
	}
}
