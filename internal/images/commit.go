package images

import (
	"context"
	"io"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Commit is the storing of a maintenance version's writes as a layer over
// its parent. It reads the whole disk and compares it with the parent,
// minutes on a large image, so it runs in the background and Versions
// shows it on the version until it has ended.
type Commit struct {
	Version int
	// Done and Total are the bytes of the disk compared and to compare.
	Done, Total int64
	Started     time.Time
	Finished    time.Time // zero while it runs
	Err         string    // why it failed, once Finished; the version stays in maintenance
	done        chan struct{}
}

// Commit closes image name's maintenance version: its content becomes
// what the machine wrote, stored as a layer over the version it was
// opened on, and its state test. It is refused while the machine still
// runs it, naming the machine, unless force. It returns the version, still
// in maintenance, once the machine's boots of it have ended; the layer is
// stored in the background (Versions shows how far), and the version is
// test once it is. A kernel built from the image (root.kernel: image)
// comes from the new content at its boots.
func (s *Service) Commit(ctx context.Context, name string, force bool) (inventory.ImageVersion, error) {
	// The commit's place is taken first, so that no second commit or
	// abandon opens the same writes while this one closes them.
	c := &Commit{Started: s.cfg.Now(), done: make(chan struct{})}
	s.mu.Lock()
	if err := s.commitRunningLocked(name); err != nil {
		s.mu.Unlock()
		return inventory.ImageVersion{}, err
	}
	s.commits[name] = c
	s.mu.Unlock()
	m, disk, err := s.closeEdit(ctx, name, force)
	if err != nil {
		s.mu.Lock()
		delete(s.commits, name)
		s.mu.Unlock()
		close(c.done)
		return m, err
	}
	s.mu.Lock()
	c.Version, c.Total = m.Version, disk.Size()
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(c.done)
		err := s.storeCommit(name, m, disk, force, c)
		s.mu.Lock()
		c.Finished = s.cfg.Now()
		if err != nil {
			c.Err = err.Error()
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Error("image version not committed; it stays in maintenance, run image commit again", "name", name, "version", m.Version, "err", err)
		}
	}()
	return m, nil
}

// storeCommit stores the disk as a layer and records the version as test.
func (s *Service) storeCommit(name string, m inventory.ImageVersion, disk rootdisk.Edited, force bool, c *Commit) error {
	ctx := s.ctx
	res, err := s.cfg.Blobs.StoreLayer(ctx, &commitReader{r: disk, s: s, c: c}, disk.Size(), m.SHA256)
	disk.Close()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.arrived[res.SHA256] = s.cfg.Now()
	s.mu.Unlock()
	s.arrive(ctx, res.SHA256)
	v, err := s.cfg.Store.CommitImageVersion(ctx, name, m.Version, res.SHA256, res.Allocated, s.cfg.Now())
	if err != nil {
		return err
	}
	if err := s.cfg.Edits.DropEdit(name, m.Version); err != nil {
		s.log.Warn("the writes of a committed version are left on disk", "name", name, "version", m.Version, "err", err)
	}
	s.log.Info("image version committed", "name", name, "version", v.Version, "sha256", v.SHA256, "stored", v.Stored, "forced", force)
	return nil
}

// commitRunning refuses while a commit of image name runs.
func (s *Service) commitRunning(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitRunningLocked(name)
}

func (s *Service) commitRunningLocked(name string) error {
	if c := s.commits[name]; c != nil && c.Finished.IsZero() {
		return inventory.Conflict("name", "image %s version %d is being committed (%d of %d bytes compared); wait for it (bootfleet image versions %s)",
			name, c.Version, c.Done, c.Total, name)
	}
	return nil
}

// commitOf is the commit of image name's version, running or failed, for
// Versions; nil when there is none or it succeeded.
func (s *Service) commitOf(name string, version int) *Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.commits[name]
	if c == nil || c.Version != version || (!c.Finished.IsZero() && c.Err == "") {
		return nil
	}
	out := *c
	return &out
}

// commitReader counts how far the layer's store has read the disk, which
// it reads in order once (and again, at random, where blocks changed).
type commitReader struct {
	r io.ReaderAt
	s *Service
	c *Commit
}

func (r *commitReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
	r.s.mu.Lock()
	if end := off + int64(n); end > r.c.Done {
		r.c.Done = end
	}
	r.s.mu.Unlock()
	return n, err
}
