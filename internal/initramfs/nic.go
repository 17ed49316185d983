package initramfs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// DefaultNICDrivers are the NIC drivers an initramfs holds when the admin
// names none: the wired NICs PCs and servers boot from by PXE, and the
// virtual ones of the hypervisors a lab tries bootfleet on. Each costs
// every machine its compressed size at every boot (36 KiB for virtio_net,
// 230 KiB for i40e with Debian 12's kernel), so the list stops where
// NICs get rare in a network-booted fleet:
//
//   - virtio_net, vmxnet3: KVM/QEMU and VMware guests;
//   - e1000: QEMU's default NIC and older Intel PCI cards;
//   - e1000e, igb, igc: Intel 1 and 2.5 GbE, onboard on most business PCs
//     and servers (I219, I210/I350, I225/I226);
//   - r8169: Realtek, onboard on most consumer PCs;
//   - tg3: Broadcom NetXtreme 1 GbE, onboard on many Dell and HPE servers;
//   - ixgbe, i40e, bnxt_en: the common 10/25 GbE server NICs (Intel
//     82599/X540/X550, X710/XL710, Broadcom NetXtreme-C/E).
//
// Left out: ice (Intel E810, 360 KiB, and without its DDP firmware file
// it only runs in safe mode) and mlx5_core (Mellanox ConnectX-4 and
// later, 700 KiB): 100 GbE data-centre NICs; add them by name
// ("default,ice,mlx5_core").
var DefaultNICDrivers = []string{"virtio_net", "vmxnet3", "e1000", "e1000e", "igb", "igc", "r8169", "tg3", "ixgbe", "i40e", "bnxt_en"}

// NICDriversNone asks for no NIC driver at all, for a kernel with its NIC
// driver built in.
const NICDriversNone = "none"

// nicDriversDefault in a list stands for DefaultNICDrivers.
const nicDriversDefault = "default"

var moduleNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// ParseNICDrivers turns the admin's list (--nic-drivers, nbd.nic_drivers)
// into module names: empty means DefaultNICDrivers, "default" stands for
// them inside a list, "none" alone means no driver (the result is an
// empty, non-nil list), and names are normalized ('-' as '_') and
// deduplicated in order. A name is only checked for its form here; a
// driver the kernel lacks is left out by Build, with a warning.
func ParseNICDrivers(list []string) ([]string, error) {
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	none := false
	for _, raw := range list {
		name := normalize(strings.ToLower(strings.TrimSpace(raw)))
		switch {
		case name == "":
			continue
		case name == NICDriversNone:
			none = true
		case name == nicDriversDefault:
			for _, d := range DefaultNICDrivers {
				add(d)
			}
		case moduleNameRE.MatchString(name):
			add(name)
		default:
			return nil, fmt.Errorf("NIC driver %q: want a kernel module name such as e1000e, or default or none", raw)
		}
	}
	if none {
		if len(out) > 0 {
			return nil, fmt.Errorf("NIC drivers %q: none cannot go with driver names; give none alone, or only drivers", strings.Join(list, ","))
		}
		return []string{}, nil
	}
	if len(out) == 0 {
		return slices.Clone(DefaultNICDrivers), nil
	}
	return out, nil
}
