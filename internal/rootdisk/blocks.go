package rootdisk

import (
	"fmt"
	"net"
	"strings"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// OverlayBlocks is the blocks the overlay of the export named name holds,
// encoded (blockset.Append), for the machine's agent, which must never
// answer them from its cache of the base. The export name is the
// credential, checked as for an NBD client: the latest boot's secret,
// from the machine's leased address. A disk without an overlay (mode
// none) holds none; a read-only base export of a client overlay has no
// server-side blocks to tell and is refused.
func (m *Manager) OverlayBlocks(name string, remote net.Addr) ([]byte, error) {
	if strings.HasPrefix(name, basePrefix) {
		return nil, fmt.Errorf("%w: a client overlay's base export has no server-side overlay", nbd.ErrUnknownExport)
	}
	e, err := m.Lookup(name, remote)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	set, shift := &blockset.Set{}, uint8(12)
	if x, ok := e.(*export); ok {
		if o, ok := x.Disk.(*blockstore.Overlay); ok {
			set, shift = o.Blocks()
		}
	}
	return set.Append(nil, shift), nil
}
