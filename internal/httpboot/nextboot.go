package httpboot

import (
	"context"
	"net"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// NextBoots are the one-shot boot overrides of bootfleet machine
// next-boot (an inventory.Store). Get only reads, so a server asks it on
// every script; Take deletes, and only one server's Take gets it.
type NextBoots interface {
	GetNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error)
	TakeNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error)
}

// MilestoneNextBoot names the milestone a boot records when it took an
// override: "next-boot-" and the target, so its boot record says so.
const MilestoneNextBoot = "next-boot-"

// localScript and localGrub send a machine on to its local disk: iPXE's
// and grub's exit return to the firmware, which tries its next boot
// device.
const (
	localScript = "#!ipxe\necho bootfleet: this boot goes to the local disk (bootfleet machine next-boot)\nexit\n"
	localGrub   = "# bootfleet: this boot goes to the local disk (bootfleet machine next-boot)\nexit\n"
)

// nextBoot applies mac's override to t, if it has one, and takes it. It
// reports local when the machine should boot its disk. A store that fails
// leaves the boot as it was: an override is worth less than a boot.
// A grub machine may be sent to a profile of either loader: grub loads
// its kernel and initrd all the same (under Secure Boot, if signed).
func (s *server) nextBoot(ctx context.Context, t machineview.Target, remote string) (machineview.Target, bool) {
	if s.NextBoots == nil {
		return t, false
	}
	mac := t.Machine.MAC
	target, err := s.NextBoots.GetNextBoot(ctx, mac)
	if err == nil && target != "" {
		target, err = s.NextBoots.TakeNextBoot(ctx, mac)
	}
	if err != nil {
		s.log.Warn("next boot: read the override failed; booting the machine's own profile", "mac", mac.String(), "err", err)
		return t, false
	}
	if target == "" {
		return t, false
	}
	if s.Milestones != nil {
		s.Milestones.Milestone(mac, MilestoneNextBoot+target, remote)
	}
	if target == inventory.NextBootLocal {
		s.log.Info("next boot taken", "mac", mac.String(), "name", t.Machine.Name, "target", target)
		return t, true
	}
	p, ok := s.Fleet.Profile(target)
	if !ok {
		s.log.Error("next boot names a profile that is gone; booting the machine's own profile", "mac", mac.String(), "target", target)
		return t, false
	}
	s.log.Info("next boot taken", "mac", mac.String(), "name", t.Machine.Name, "target", target, "instead_of", t.Profile)
	t.Profile, t.Spec = target, p
	return t, false
}
