package agent

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// LeaseFile is where the initramfs's udhcpc script records the lease (or
// the agent, the SLAAC address of a root on IPv6 servers), as
// KEY=VALUE lines (interface, ip, mask, router, dns), under the /run the
// agent hands to the new root.
const LeaseFile = "/run/bootfleet/lease"

// Lease is the address the initramfs configured on the NIC that carries
// the root disk.
type Lease struct {
	Interface string
	MAC       net.HardwareAddr
	Address   netip.Prefix
	Router    netip.Addr // invalid: none
	DNS       []netip.Addr
}

// ParseLease reads LeaseFile's KEY=VALUE lines; mac comes from the NIC.
func ParseLease(text string, mac net.HardwareAddr) (Lease, error) {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			kv[k] = v
		}
	}
	l := Lease{Interface: kv["interface"], MAC: mac}
	if l.Interface == "" {
		return l, fmt.Errorf("lease record has no interface=; got %q", text)
	}
	prefix := kv["mask"]
	if prefix == "" {
		prefix = "24"
	}
	p, err := netip.ParsePrefix(kv["ip"] + "/" + prefix)
	if err != nil {
		return l, fmt.Errorf("lease record: ip=%q mask=%q is not an IP address and prefix length: %v", kv["ip"], kv["mask"], err)
	}
	l.Address = p
	if r := strings.Fields(kv["router"]); len(r) > 0 {
		if l.Router, err = netip.ParseAddr(r[0]); err != nil {
			return l, fmt.Errorf("lease record: router=%q: %w", kv["router"], err)
		}
	}
	for _, d := range strings.Fields(kv["dns"]) {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return l, fmt.Errorf("lease record: dns=%q: %w", kv["dns"], err)
		}
		l.DNS = append(l.DNS, a)
	}
	return l, nil
}

// HandoffFiles are the runtime configuration files, relative to /run,
// that keep the new root's own network stack off the root disk's NIC, the
// way dracut and open-iscsi roots do: dropping or re-leasing that address
// while the root is mounted cuts the disk.
//
//   - systemd-networkd: a .network file that sorts before the image's own,
//     with the lease as static configuration and KeepConfiguration=yes, so
//     networkd neither flushes the address at start nor drops it at
//     shutdown, and still counts the link as online for wait-online.
//   - udev: a .link file that keeps the NIC's kernel name. Renaming it to
//     its predictable name (enp0s3) fails while it is up, and udev then
//     never marks it initialized, so networkd would leave it pending.
//   - NetworkManager: the NIC, by MAC, is unmanaged.
//
// ifupdown has no runtime override; the README tells image authors to
// leave the NIC out of /etc/network/interfaces.
func HandoffFiles(l Lease) map[string]string {
	mac := l.MAC.String()
	var nd strings.Builder
	fmt.Fprintf(&nd, "# Written by bootfleet-agent: this NIC carries the root disk over NBD.\n")
	fmt.Fprintf(&nd, "# Keep the initramfs's address through boot and shutdown.\n")
	fmt.Fprintf(&nd, "[Match]\n")
	if mac != "" {
		fmt.Fprintf(&nd, "MACAddress=%s\n", mac)
	} else {
		fmt.Fprintf(&nd, "Name=%s\n", l.Interface)
	}
	fmt.Fprintf(&nd, "\n[Link]\nRequiredForOnline=yes\n\n[Network]\nKeepConfiguration=yes\nAddress=%s\n", l.Address)
	if l.Address.Addr().Is6() {
		// The address came from SLAAC: networkd keeps following the
		// router advertisements that gave it, for its lifetime and routes.
		fmt.Fprintf(&nd, "IPv6AcceptRA=yes\n")
	}
	if l.Router.IsValid() {
		fmt.Fprintf(&nd, "Gateway=%s\n", l.Router)
	}
	for _, d := range l.DNS {
		fmt.Fprintf(&nd, "DNS=%s\n", d)
	}
	files := map[string]string{"systemd/network/00-bootfleet-root.network": nd.String()}
	if mac != "" {
		files["systemd/network/00-bootfleet-root.link"] = "# Written by bootfleet-agent: this NIC carries the root disk over NBD.\n" +
			"[Match]\nMACAddress=" + mac + "\n\n[Link]\nName=" + l.Interface + "\n"
		files["NetworkManager/conf.d/90-bootfleet-root.conf"] = "# Written by bootfleet-agent: this NIC carries the root disk over NBD.\n" +
			"[keyfile]\nunmanaged-devices=mac:" + mac + "\n"
	}
	return files
}
