package storm

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// DHCPOptions are the DHCP client's timers.
type DHCPOptions struct {
	// Timeout is the wait after the first DISCOVER or REQUEST; it doubles
	// at every retransmission, as PXE 2.1 and iPXE do. Default 4 s for
	// uefi and bios (EDK II: 4, 8, 16, 32 s), 1 s for iPXE.
	Timeout time.Duration
	// Tries is how many DISCOVERs (and then REQUESTs) are sent before the
	// machine gives up. Default 4.
	Tries int
	// OfferWait is how long the client keeps listening for a ProxyDHCP
	// offer once it has an address offer without a boot file (or, as iPXE,
	// without the no-pxedhcp flag). Default 2 s.
	OfferWait time.Duration
}

// dhcpTransport sends broadcasts and delivers replies by transaction ID.
type dhcpTransport interface {
	listen(xid dhcpv4.TransactionID) (<-chan *dhcpv4.DHCPv4, func())
	broadcast(*dhcpv4.DHCPv4) error
}

// lease is what a DORA gave a machine.
type lease struct {
	addr     netip.Prefix // address and subnet
	server   netip.Addr   // the boot server: TFTP, or the host of an http:// boot file
	bootFile string
	tries    int   // DISCOVERs and REQUESTs sent
	bytes    int64 // DHCP payload bytes of the OFFERs and ACK received
}

// dora runs DISCOVER, OFFER(s), REQUEST, ACK as the firmware would.
func dora(ctx context.Context, tr dhcpTransport, mac net.HardwareAddr, fw Firmware, asIPXE bool, o DHCPOptions) (lease, error) {
	var xid dhcpv4.TransactionID
	rand.Read(xid[:])
	id := identity(fw, asIPXE)
	ch, stop := tr.listen(xid)
	defer stop()
	start := time.Now()
	secs := func() uint16 { return uint16(min(time.Since(start)/time.Second, 65535)) }

	var l lease
	var offers []offerInfo
	var sel selection
	timeout := o.Timeout
	for try := 0; ; try++ {
		if try == o.Tries {
			return l, offerFailure(offers, o)
		}
		l.tries++
		if err := tr.broadcast(newClientMessage(dhcpv4.MessageTypeDiscover, mac, xid, secs(), id)); err != nil {
			return l, err
		}
		complete, err := collectOffers(ctx, ch, &offers, &sel, asIPXE, timeout, o.OfferWait, &l.bytes)
		if err != nil {
			return l, err
		}
		if complete || (sel.lease != nil && sel.boot != nil) {
			break
		}
		timeout *= 2
	}

	timeout = o.Timeout
	for try := 0; ; try++ {
		if try == o.Tries {
			return l, fmt.Errorf("no DHCPACK from %v after %d REQUESTs for %v", sel.lease.msg.ServerIdentifier(), o.Tries, sel.lease.addr)
		}
		l.tries++
		if err := tr.broadcast(newRequest(sel.lease.msg, mac, xid, secs(), id)); err != nil {
			return l, err
		}
		ack, err := waitAck(ctx, ch, timeout, &l.bytes)
		if err != nil {
			return l, err
		}
		if ack == nil {
			timeout *= 2
			continue
		}
		if ack.MessageType() == dhcpv4.MessageTypeNak {
			return l, fmt.Errorf("server %v sent DHCPNAK %q for %v", ack.ServerIdentifier(), ack.Message(), sel.lease.addr)
		}
		return finishLease(l, ack, sel)
	}
}

// collectOffers gathers OFFERs for one DISCOVER until the selection is
// complete, the retransmission timeout passes, or OfferWait has passed
// since the first usable address offer.
func collectOffers(ctx context.Context, ch <-chan *dhcpv4.DHCPv4, offers *[]offerInfo, sel *selection, asIPXE bool, timeout, offerWait time.Duration, bytes *int64) (bool, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	waiting := false
	for {
		m, err := nextReply(ctx, ch, t.C, bytes, dhcpv4.MessageTypeOffer)
		if m == nil {
			return false, err
		}
		*offers = append(*offers, classifyOffer(m))
		var complete bool
		*sel, complete = selectOffers(*offers, asIPXE)
		if complete {
			return true, nil
		}
		if sel.lease != nil && !waiting {
			waiting = true
			t.Reset(offerWait)
		}
	}
}

// waitAck returns the ACK or NAK, or nil after timeout.
func waitAck(ctx context.Context, ch <-chan *dhcpv4.DHCPv4, timeout time.Duration, bytes *int64) (*dhcpv4.DHCPv4, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	return nextReply(ctx, ch, t.C, bytes, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak)
}

// nextReply returns the next reply of one of the types, adding its size
// to bytes, or nil when expired fires or ctx is done (with its error).
func nextReply(ctx context.Context, ch <-chan *dhcpv4.DHCPv4, expired <-chan time.Time, bytes *int64, types ...dhcpv4.MessageType) (*dhcpv4.DHCPv4, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-expired:
			return nil, nil
		case m := <-ch:
			if slices.Contains(types, m.MessageType()) {
				*bytes += int64(len(m.ToBytes()))
				return m, nil
			}
		}
	}
}

func finishLease(l lease, ack *dhcpv4.DHCPv4, sel selection) (lease, error) {
	a, ok := netip.AddrFromSlice(ack.YourIPAddr.To4())
	if !ok || a.IsUnspecified() {
		return l, fmt.Errorf("DHCPACK from %v carries no address (yiaddr 0.0.0.0)", ack.ServerIdentifier())
	}
	bits := 24
	if m := ack.SubnetMask(); m != nil {
		bits, _ = m.Size()
	} else if m := sel.lease.msg.SubnetMask(); m != nil {
		bits, _ = m.Size()
	}
	l.addr = netip.PrefixFrom(a, bits)
	boot := *sel.boot
	if sel.boot == sel.lease {
		boot = classifyOffer(ack) // the ACK's options are the ones that count
		if boot.bootFile == "" {
			boot = *sel.boot
		}
	}
	l.bootFile, l.server = boot.bootFile, boot.server
	if !l.server.IsValid() {
		return l, fmt.Errorf("boot file %q from %v but no server address (siaddr, option 54)", l.bootFile, boot.msg.ServerIdentifier())
	}
	return l, nil
}

// offerFailure says what the offers that came lacked.
func offerFailure(offers []offerInfo, o DHCPOptions) error {
	var waits []string
	t := o.Timeout
	for range o.Tries {
		waits = append(waits, t.String())
		t *= 2
	}
	after := fmt.Sprintf("after %d DISCOVERs (waits %s)", o.Tries, strings.Join(waits, ", "))
	if len(offers) == 0 {
		return fmt.Errorf("no DHCPOFFER %s", after)
	}
	var seen []string
	for _, of := range offers {
		switch {
		case of.binl:
			seen = append(seen, fmt.Sprintf("a BINL offer from %v (option 43 without discovery control bit 3: boot server discovery on port 4011 is not emulated)", of.msg.ServerIdentifier()))
		case of.addr.IsValid() && of.bootFile == "":
			seen = append(seen, fmt.Sprintf("an address %v from %v without a boot file", of.addr, of.msg.ServerIdentifier()))
		case of.proxy:
			seen = append(seen, fmt.Sprintf("a proxy offer from %v for %q", of.msg.ServerIdentifier(), of.bootFile))
		default:
			seen = append(seen, fmt.Sprintf("an offer from %v", of.msg.ServerIdentifier()))
		}
	}
	return fmt.Errorf("no usable offer %s: got %s", after, strings.Join(seen, "; "))
}
