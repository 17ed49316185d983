package images

import (
	"context"
	"errors"
	"net"
	"slices"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Edits are the writes of maintenance versions on this server;
// *rootdisk.Manager implements it.
type Edits interface {
	// OpenEdit makes the place of a new maintenance version's writes,
	// over content sha.
	OpenEdit(image string, version int, sha string) error
	// CloseEdit ends the machine's boots of the version and returns its
	// disk; refused while the machine runs it, unless force.
	CloseEdit(mac net.HardwareAddr, image string, version int, sha string, force bool) (rootdisk.Edited, error)
	// DropEdit deletes the version's writes.
	DropEdit(image string, version int) error
}

var errNoEdits = inventory.Invalid("", "this server keeps no maintenance versions (it serves no diskless roots)")

// Edit opens a maintenance version of image name over its newest version
// that is not retired. Machine mac, and only it, boots it read-write at
// its next boot, from this server. A second edit while one is open is
// refused naming the machine that holds it.
func (s *Service) Edit(ctx context.Context, name string, mac net.HardwareAddr, by string) (inventory.ImageVersion, error) {
	if s.cfg.Edits == nil {
		return inventory.ImageVersion{}, errNoEdits
	}
	vs, err := s.cfg.Store.ListImageVersions(ctx, name)
	if err != nil {
		return inventory.ImageVersion{}, err
	}
	base, err := inventory.Resolve(vs, 0, inventory.ChannelTest) // the newest in test or production
	if err != nil {
		return base, inventory.Conflict("name", "image %s has no version in test or production to edit", name)
	}
	v, err := s.cfg.Store.AddImageVersion(ctx, inventory.ImageVersion{Image: name, SHA256: base.SHA256, Size: base.Size, Parent: base.Version,
		State: inventory.VersionMaintenance, Machine: mac.String(), Server: s.cfg.Self, By: by, Made: s.cfg.Now()})
	if err != nil {
		return v, err
	}
	if err := s.cfg.Edits.OpenEdit(name, v.Version, base.SHA256); err != nil {
		if _, aerr := s.cfg.Store.StepImageVersion(context.WithoutCancel(ctx), name, v.Version, inventory.OpAbandon, s.cfg.Now()); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return v, err
	}
	s.log.Info("image version opened for maintenance", "name", name, "version", v.Version, "parent", base.Version, "machine", v.Machine, "by", by)
	return v, nil
}

// closeEdit ends the boots of image name's open maintenance version and
// returns it with its disk.
func (s *Service) closeEdit(ctx context.Context, name string, force bool) (inventory.ImageVersion, rootdisk.Edited, error) {
	m, mac, err := s.maintenance(ctx, name)
	if err != nil {
		return m, nil, err
	}
	disk, err := s.cfg.Edits.CloseEdit(mac, name, m.Version, m.SHA256, force)
	return m, disk, err
}

// maintenance returns image name's open maintenance version, checking it
// is this server's to close.
func (s *Service) maintenance(ctx context.Context, name string) (inventory.ImageVersion, net.HardwareAddr, error) {
	if s.cfg.Edits == nil {
		return inventory.ImageVersion{}, nil, errNoEdits
	}
	vs, err := s.cfg.Store.ListImageVersions(ctx, name)
	if err != nil {
		return inventory.ImageVersion{}, nil, err
	}
	i := slices.IndexFunc(vs, func(v inventory.ImageVersion) bool { return v.State == inventory.VersionMaintenance })
	if i < 0 {
		return inventory.ImageVersion{}, nil, inventory.Conflict("name", "image %s has no maintenance version open; open one with bootfleet image edit %s --machine M", name, name)
	}
	v := vs[i]
	if v.Server != s.cfg.Self {
		return v, nil, inventory.Conflict("name", "image %s version %d holds its writes on server %s; ask that server", name, v.Version, v.Server)
	}
	mac, err := net.ParseMAC(v.Machine)
	return v, mac, err
}

// Abandon throws image name's maintenance version away with its writes;
// refused while the machine still runs it, unless force.
func (s *Service) Abandon(ctx context.Context, name string, force bool) (inventory.ImageVersion, error) {
	if err := s.commitRunning(name); err != nil {
		return inventory.ImageVersion{}, err
	}
	m, disk, err := s.closeEdit(ctx, name, force)
	if err != nil {
		return m, err
	}
	disk.Close()
	v, err := s.cfg.Store.StepImageVersion(ctx, name, m.Version, inventory.OpAbandon, s.cfg.Now())
	if err != nil {
		return v, err
	}
	if err := s.cfg.Edits.DropEdit(name, m.Version); err != nil {
		s.log.Warn("the writes of an abandoned version are left on disk", "name", name, "version", m.Version, "err", err)
	}
	s.log.Info("image version abandoned", "name", name, "version", v.Version, "machine", m.Machine)
	return v, nil
}
