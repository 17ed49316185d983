package images

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Version is an image version with what boots it.
type Version struct {
	inventory.ImageVersion
	// Current says it is the version machines following production boot.
	Current bool
	// Profiles are the profiles whose machines boot this version next.
	Profiles []string
	// Machines are the machines that boot this version next by their own
	// root channel, over their profile's, named as Machine.String does.
	Machines []string
	// Users are the machines of this server reading it now: booted on it,
	// or holding it with a persistent overlay made on it.
	Users []rootdisk.Use
	// Commit is this server's commit of a maintenance version while it
	// runs, or after it failed.
	Commit *Commit
}

// Versions returns image name's versions, oldest first, with what boots
// each, or an inventory.ErrNotFound error.
func (s *Service) Versions(ctx context.Context, name string) ([]Version, error) {
	img, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil {
		return nil, err
	}
	vs, err := s.cfg.Store.ListImageVersions(ctx, name)
	if err != nil {
		return nil, err
	}
	profiles, err := s.cfg.Store.ListProfiles(ctx)
	if err != nil {
		return nil, err
	}
	follow := map[int][]string{} // version -> profiles booting it next
	roots := map[string]string{} // profile -> its root image
	for _, p := range profiles {
		roots[p.Name] = p.Root.Image
		if p.Root.Image != name {
			continue
		}
		if v, err := inventory.Resolve(vs, img.Version, p.Root.Channel); err == nil {
			follow[v.Version] = append(follow[v.Version], p.Name)
		}
	}
	own, err := s.ownChannels(ctx, name, roots, vs, img.Version)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(vs))
	for _, v := range vs {
		o := Version{ImageVersion: v, Current: v.Version == img.Version, Profiles: follow[v.Version], Machines: own[v.Version]}
		if v.State == inventory.VersionMaintenance {
			o.Commit = s.commitOf(name, v.Version)
		}
		if v.State != inventory.VersionRetired {
			o.Users = s.cfg.Boots.Users(v.SHA256)
		}
		out = append(out, o)
	}
	return out, nil
}

// ownChannels maps each version of image name to the machines that boot
// it next by their own root channel, given each profile's root image.
func (s *Service) ownChannels(ctx context.Context, name string, roots map[string]string, vs []inventory.ImageVersion, current int) (map[int][]string, error) {
	ms, err := s.cfg.Store.ListMachines(ctx, inventory.MachineFilter{})
	if err != nil {
		return nil, fmt.Errorf("reading the machines' root channels: %w", err)
	}
	own := map[int][]string{}
	for _, m := range ms {
		profile := m.Profile
		if profile == "" {
			profile = s.cfg.DefaultProfile
		}
		if m.Channel == "" || roots[profile] != name {
			continue
		}
		if v, err := inventory.Resolve(vs, current, m.Channel); err == nil {
			own[v.Version] = append(own[v.Version], m.String())
		}
	}
	return own, nil
}

// Step applies op to version of image name (0 for rollback) and returns
// the version as it is now. A retire is refused while a profile or a
// machine of this server boots the version, naming them. Content only a
// retired or abandoned version named is then deleted, by the package's
// rules.
func (s *Service) Step(ctx context.Context, name string, version int, op inventory.VersionOp) (inventory.ImageVersion, error) {
	if op == inventory.OpRetire {
		vs, err := s.Versions(ctx, name)
		if err != nil {
			return inventory.ImageVersion{}, err
		}
		if i := slices.IndexFunc(vs, func(v Version) bool { return v.Version == version }); i >= 0 {
			if who := bootsOf(vs[i]); who != "" {
				return inventory.ImageVersion{}, inventory.Conflict("version", "version %d of image %s is booted by %s; move them off it first", version, name, who)
			}
		}
	}
	v, err := s.cfg.Store.StepImageVersion(ctx, name, version, op, s.cfg.Now())
	if err != nil {
		return v, err
	}
	s.log.Info("image version "+string(op), "name", name, "version", v.Version, "state", string(v.State), "sha256", v.SHA256)
	if op == inventory.OpRetire || op == inventory.OpAbandon {
		s.release(ctx, v.SHA256)
	}
	return v, nil
}

// bootsOf lists what boots v, for a refusal; "" when nothing does.
func bootsOf(v Version) string {
	var who []string
	for _, p := range v.Profiles {
		who = append(who, "profile "+p)
	}
	for _, m := range v.Machines {
		who = append(who, "machine "+m+" (its own root channel; bootfleet machine set --root-channel)")
	}
	for _, u := range v.Users {
		if u.Persistent {
			who = append(who, "machine "+u.MAC+" (persistent overlay; bootfleet machine reset "+u.MAC+")")
		} else {
			who = append(who, "machine "+u.MAC+" (until it reboots)")
		}
	}
	return strings.Join(who, ", ")
}

// contents returns one entry per content some image version that is not
// retired names, or that such a version is stored as a layer over, as an
// image of that name and size: the content every server keeps, so any
// version can be tested, promoted or rolled back to at once.
func (s *Service) contents(ctx context.Context) ([]inventory.Image, error) {
	vs, err := s.cfg.Store.ListImageVersions(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("reading the image versions: %w", err)
	}
	type key struct {
		image   string
		version int
	}
	byKey := make(map[key]inventory.ImageVersion, len(vs))
	for _, v := range vs {
		byKey[key{v.Image, v.Version}] = v
	}
	seen := map[string]bool{}
	var out []inventory.Image
	for _, v := range vs {
		if v.State == inventory.VersionRetired {
			continue
		}
		for depth := 0; depth <= len(vs); depth++ { // a version, then its parents
			if !seen[v.SHA256] {
				seen[v.SHA256] = true
				out = append(out, inventory.Image{Name: v.Image, SHA256: v.SHA256, Size: v.Size, Imported: v.Made, Version: v.Version})
			}
			p, ok := byKey[key{v.Image, v.Parent}]
			if v.Parent == 0 || !ok {
				break
			}
			v = p
		}
	}
	return out, nil
}
