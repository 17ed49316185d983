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

// IssueRoot implements httpboot.Roots. It resolves the image name at
// render time, so the boot pins the content the name has now.
func (s *Service) IssueRoot(ctx context.Context, mac net.HardwareAddr, root inventory.Root) (httpboot.RootBoot, error) {
	img, err := s.images.GetImage(ctx, root.Image)
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
	var names []string
	for _, p := range in.Profiles {
		if p.Root.Kernel == inventory.RootKernelImage && !slices.Contains(names, p.Root.Image) {
			names = append(names, p.Root.Image)
		}
	}
	if len(names) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, name := range names {
			img, err := s.images.GetImage(ctx, name)
			if err != nil {
				continue // not imported yet: its profile's scripts say so
			}
			s.kernels.Prepare(img.Name, img.SHA256)
		}
	}()
}
