package wol

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// Target is where one magic packet goes.
type Target struct {
	MAC      net.HardwareAddr
	Password []byte // SecureOn; nil for none
	// Interface, when set, sends a limited broadcast (255.255.255.255)
	// out of that interface only: the machine's own LAN.
	Interface string
	// Broadcast, when set, is a subnet-directed broadcast address such
	// as 10.1.2.255 that routers forward to a routed LAN (when they are
	// told to). It wins over Interface.
	Broadcast net.IP
	// Port is the UDP port; 0 means Port (9).
	Port int
}

// Send sends one magic packet for t. UDP gives no answer, so nil means
// only that the packet left this host.
func Send(ctx context.Context, t Target) error {
	pkt, err := Encode(t.MAC, t.Password)
	if err != nil {
		return err
	}
	port := t.Port
	if port == 0 {
		port = Port
	}
	dst := net.IPv4bcast
	device := t.Interface
	if t.Broadcast != nil {
		if dst = t.Broadcast.To4(); dst == nil {
			return fmt.Errorf("wol: broadcast %v: want an IPv4 address like 10.1.2.255", t.Broadcast)
		}
		device = ""
	} else if device == "" {
		return fmt.Errorf("wol: wake %s: no interface and no broadcast address; set the server's interface or the machine's power broadcast", t.MAC)
	}
	lc := net.ListenConfig{Control: broadcastControl(device)}
	c, err := lc.ListenPacket(ctx, "udp4", ":0")
	if err != nil {
		return fmt.Errorf("wol: open a broadcast socket on %q: %w", device, err)
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(d)
	}
	addr := &net.UDPAddr{IP: dst, Port: port}
	if _, err := c.WriteTo(pkt, addr); err != nil {
		return fmt.Errorf("wol: send magic packet for %s to %s: %w", t.MAC, net.JoinHostPort(dst.String(), strconv.Itoa(port)), err)
	}
	return nil
}
