package images

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Merging stores a version kept as layers as a whole file again, on this
// server, in the background: machines booting meanwhile read the layers,
// the next boot after it the whole file. A check merges, one at a time,
// any content here more than MergeDepth layers deep.

// Merge is a merge of one image's version on this server.
type Merge struct {
	Image   string
	Version int
	SHA256  string
	// Done and Total are bytes copied and to copy; Total is 0 until the
	// copy starts, and stays 0 for a version already whole.
	Done, Total int64
	Started     time.Time
	Finished    time.Time // zero while it runs
	Err         string    // why it failed, once Finished
}

// StartMerge starts merging version of image name (0 for the current
// production version) on this server and returns at once; Merges says
// how far it got. A retired or maintenance version is refused, and so is
// a second merge of an image while one runs.
func (s *Service) StartMerge(ctx context.Context, name string, version int) (Merge, error) {
	img, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil {
		return Merge{}, err
	}
	vs, err := s.cfg.Store.ListImageVersions(ctx, name)
	if err != nil {
		return Merge{}, err
	}
	if version == 0 {
		version = img.Version
	}
	i := slices.IndexFunc(vs, func(v inventory.ImageVersion) bool { return v.Version == version })
	switch {
	case i < 0:
		return Merge{}, inventory.NotFound("version", "image %s has no version %d; see bootfleet image versions %s", name, version, name)
	case vs[i].State == inventory.VersionRetired || vs[i].State == inventory.VersionMaintenance:
		return Merge{}, inventory.Conflict("version", "version %d of image %s is %s; merge a test or production version", version, name, vs[i].State)
	}
	m, ok := s.startMerge(name, version, vs[i].SHA256)
	if !ok {
		return m, inventory.Conflict("name", "a merge of image %s version %d is running (%d of %d bytes); wait for it", name, m.Version, m.Done, m.Total)
	}
	return m, nil
}

// Merges returns the merges of this server since it started, running
// ones included, ordered by image.
func (s *Service) Merges() []Merge {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Merge, 0, len(s.merges))
	for _, m := range s.merges {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Merge) int { return strings.Compare(a.Image, b.Image) })
	return out
}

// startMerge starts the merge unless one of the image runs; it returns
// the merge, new or running.
func (s *Service) startMerge(name string, version int, sha string) (Merge, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.merges[name]; m != nil && m.Finished.IsZero() {
		return *m, false
	}
	m := &Merge{Image: name, Version: version, SHA256: sha, Started: s.cfg.Now()}
	s.merges[name] = m
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.log.Info("image merge started", "name", name, "version", version, "sha256", sha)
		res, err := s.cfg.Blobs.Merge(s.ctx, sha, func(done, total int64) {
			s.mu.Lock()
			m.Done, m.Total = done, total
			s.mu.Unlock()
		})
		s.mu.Lock()
		m.Finished = s.cfg.Now()
		if err != nil {
			m.Err = err.Error()
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Warn("image merge failed; the layers stay and serve as before", "name", name, "version", version, "err", err)
			return
		}
		s.log.Info("image merge done", "name", name, "version", version, "sha256", sha, "allocated", res.Allocated,
			"seconds", m.Finished.Sub(m.Started).Seconds())
	}()
	return *m, true
}

// autoMerge starts a merge of the first content here more than
// MergeDepth layers deep, unless a merge runs; a check calls it.
func (s *Service) autoMerge(imgs []inventory.Image) {
	if s.cfg.MergeDepth < 0 {
		return
	}
	s.mu.Lock()
	for _, m := range s.merges {
		if m.Finished.IsZero() {
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	for _, img := range imgs {
		c, err := s.cfg.Blobs.Chain(img.SHA256)
		if err != nil || len(c.Layers) <= s.cfg.MergeDepth {
			continue
		}
		s.log.Info("image version is stored too many layers deep; merging it", "name", img.Name, "version", img.Version,
			"layers", len(c.Layers), "merge_depth", s.cfg.MergeDepth)
		s.startMerge(img.Name, img.Version, img.SHA256)
		return
	}
}
