package diskless

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Move is the version change a reset brings a persistent machine: its
// overlay was made on version From of Image, and its root now boots To.
// From is 0 when the overlay's content is no version of the image any
// more.
type Move struct {
	Image    string
	From, To int
}

// Migration says whether a reset moves mac, booting root, to another
// version: its persistent overlay was made on content other than what
// root's channel picks now. A machine with no persistent overlay, or one
// on that content, does not move.
func (s *Service) Migration(ctx context.Context, mac net.HardwareAddr, root inventory.Root) (Move, bool, error) {
	if root.Image == "" || root.Overlay != inventory.OverlayPersistent {
		return Move{}, false, nil
	}
	base := s.disks.PersistentBase(mac)
	if base == "" {
		return Move{}, false, nil
	}
	img, err := s.resolve(ctx, root)
	if errors.Is(err, inventory.ErrNotFound) || errors.Is(err, inventory.ErrConflict) {
		// The root boots nothing now (image removed, pin retired): the
		// machine moves nowhere, and a reset must not be held up by it.
		return Move{}, false, nil
	}
	if err != nil {
		return Move{}, false, fmt.Errorf("the version machine %s boots next: %w", mac, err)
	}
	if img.SHA256 == base {
		return Move{}, false, nil
	}
	vs, err := s.images.ListImageVersions(ctx, root.Image)
	if err != nil {
		return Move{}, false, fmt.Errorf("the versions of image %s: %w", root.Image, err)
	}
	mv := Move{Image: root.Image, To: img.Version}
	for _, v := range vs {
		if v.SHA256 == base && v.State != inventory.VersionRetired {
			mv.From = v.Version
		}
	}
	return mv, true, nil
}
