package diskless

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// Images is what diskless reads of the fleet's images; an
// inventory.Store implements it.
type Images interface {
	// GetImage returns a name's current production version's content.
	GetImage(ctx context.Context, name string) (inventory.Image, error)
	ListImageVersions(ctx context.Context, image string) ([]inventory.ImageVersion, error)
}

// IssueRoot implements httpboot.Roots. It resolves the image name and the
// root's channel at render time, so the boot pins the content the
// channel has now, until the machine's next boot.
func (s *Service) IssueRoot(ctx context.Context, mac net.HardwareAddr, root inventory.Root) (httpboot.RootBoot, error) {
	if edit, ok, err := s.editing(ctx, mac, root.Image); err != nil {
		return httpboot.RootBoot{}, fmt.Errorf("root image: %w", err)
	} else if ok {
		return s.issueEdit(ctx, mac, edit)
	}
	img, err := s.resolve(ctx, root)
	if err != nil {
		return httpboot.RootBoot{}, fmt.Errorf("root image: %w", err)
	}
	if err := s.ensure(ctx, img); err != nil {
		return httpboot.RootBoot{}, err
	}
	b, err := s.disks.IssueBoot(mac, img, root.Overlay)
	if err != nil {
		return httpboot.RootBoot{}, err
	}
	mc, err := s.rootArgs(b.SHA256, root.Overlay)
	if err != nil {
		// The boot still works by unicast; say why it is not multicast.
		s.log.Warn("root not multicast; the machine reads it by unicast", "mac", mac.String(), "image", img.Name, "err", err)
	}
	return httpboot.RootBoot{Arg: b.Root, Args: joinArgs(b.Args, mc), Image: img.Name, SHA256: b.SHA256}, nil
}

func joinArgs(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + " " + b
}

// PrepareKernels starts building, in the background, the boot files of
// the images that root.kernel: image profiles of in name, so the first
// boot of a new image version need not wait for them. Call it after every
// fleet view reload: at start, after API writes such as an image import,
// and on the reloads of a shared store. It does not block.
func (s *Service) PrepareKernels(in machineview.Input) {
	var roots []inventory.Root // image and channel, each once
	add := func(r inventory.Root) {
		r = inventory.Root{Image: r.Image, Channel: r.Channel}
		if !slices.Contains(roots, r) {
			roots = append(roots, r)
		}
	}
	for _, p := range in.Profiles {
		if p.Root.Kernel == inventory.RootKernelImage {
			add(p.Root)
		}
	}
	// A machine's own channel may pick another version of its profile's.
	for _, m := range in.Machines {
		profile := m.Profile
		if profile == "" {
			profile = in.DefaultProfile
		}
		if p, ok := in.Profiles[profile]; ok && m.Channel != "" && p.Root.Kernel == inventory.RootKernelImage {
			add(inventory.Root{Image: p.Root.Image, Channel: m.Channel})
		}
	}
	if len(roots) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, r := range roots {
			img, err := s.resolve(ctx, r)
			if err != nil {
				continue // not imported yet: its profile's scripts say so
			}
			s.kernels.Prepare(img.Name, img.SHA256)
		}
	}()
}

// resolve is the content root boots now: its image's current production
// version, read in one row so that a promote is seen whole, or the
// version its channel picks.
func (s *Service) resolve(ctx context.Context, root inventory.Root) (inventory.Image, error) {
	img, err := s.images.GetImage(ctx, root.Image)
	if err != nil || root.Channel == "" {
		return img, err
	}
	vs, err := s.images.ListImageVersions(ctx, root.Image)
	if err != nil {
		return img, err
	}
	v, err := inventory.Resolve(vs, img.Version, root.Channel)
	if err != nil {
		return img, fmt.Errorf("image %s, channel %s: %w", root.Image, root.Channel, err)
	}
	return inventory.Image{Name: img.Name, SHA256: v.SHA256, Size: v.Size, Imported: v.Made, Version: v.Version}, nil
}

// editing returns the maintenance version of image that mac edits, if
// there is one: the machine boots it read-write, whatever its channel.
func (s *Service) editing(ctx context.Context, mac net.HardwareAddr, image string) (inventory.ImageVersion, bool, error) {
	vs, err := s.images.ListImageVersions(ctx, image)
	if err != nil {
		return inventory.ImageVersion{}, false, err
	}
	for _, v := range vs {
		if v.State == inventory.VersionMaintenance && v.Machine == mac.String() {
			return v, true, nil
		}
	}
	return inventory.ImageVersion{}, false, nil
}

// issueEdit boots mac read-write on maintenance version v, over the
// content it was opened on.
func (s *Service) issueEdit(ctx context.Context, mac net.HardwareAddr, v inventory.ImageVersion) (httpboot.RootBoot, error) {
	img := inventory.Image{Name: v.Image, SHA256: v.SHA256, Size: v.Size, Version: v.Parent}
	if err := s.ensure(ctx, img); err != nil {
		return httpboot.RootBoot{}, err
	}
	b, err := s.disks.IssueEdit(mac, img, v.Version)
	if err != nil {
		return httpboot.RootBoot{}, err
	}
	return httpboot.RootBoot{Arg: b.Root, Args: b.Args, Image: img.Name, SHA256: b.SHA256}, nil
}
