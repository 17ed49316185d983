package rootdisk

import (
	"errors"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockstore"
)

// content is an open image content: a *blockstore.Image, or a
// *blockstore.Layered for a version stored as layers.
type content interface {
	blockstore.Base
	SetSharers(n int)
	InMemory() bool
	Close() error
}

// sharedImage is one open base image and the attachments using it.
type sharedImage struct {
	file content
	refs int
	idle *time.Timer // closes the image once it has lain unused for the linger; nil while in use
}

// defaultImageLinger is how long a base image in memory stays open after
// its last session ends: the machines of a lab boot a minute or two apart,
// and reopening means faulting the whole mapping in again. An image on a
// disk closes at once, because a mapping left in place would pin its pages
// against an admin's cache drop (FADV_DONTNEED and drop_caches skip mapped
// pages).
const defaultImageLinger = 2 * time.Minute

// openImage returns the open base image of blob sha, through its layers
// if it has any, opening it unless it is open already (in use, or
// lingering). The caller holds m.mu.
func (m *Manager) openImage(sha string) (content, error) {
	if s := m.images[sha]; s != nil {
		if s.idle != nil {
			s.idle.Stop()
			s.idle = nil
		}
		s.refs++
		s.file.SetSharers(s.refs)
		return s.file, nil
	}
	c, err := m.cfg.Blobs.Chain(sha)
	if err != nil {
		return nil, err
	}
	var f content
	if len(c.Layers) == 0 {
		f, err = blockstore.OpenImage(c.Base)
	} else {
		f, err = blockstore.OpenLayered(c.Base, c.Layers)
	}
	if err != nil {
		return nil, err
	}
	f.SetSharers(1)
	m.images[sha] = &sharedImage{file: f, refs: 1}
	return f, nil
}

// closeImage lets go of blob sha's image. After the last user an image in
// memory stays open for the linger (Config.ImageLinger), then closes
// unless reopened; one on a disk closes at once. The caller holds m.mu.
func (m *Manager) closeImage(sha string) error {
	s := m.images[sha]
	if s == nil {
		return nil
	}
	if s.refs--; s.refs > 0 {
		s.file.SetSharers(s.refs)
		return nil
	}
	linger := m.cfg.ImageLinger
	if linger == 0 {
		linger = defaultImageLinger
	}
	if linger < 0 || !s.file.InMemory() {
		delete(m.images, sha)
		return s.file.Close()
	}
	s.idle = time.AfterFunc(linger, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		// Closed meanwhile, and perhaps opened anew with a linger of its
		// own: not this timer's to close. dropIdle leaves it if reopened.
		if m.images[sha] == s {
			if err := m.dropIdle(sha); err != nil {
				m.log.Warn("closing an unused base image failed", "sha256", sha, "err", err)
			}
		}
	})
	return nil
}

// dropIdle closes blob sha's image now if no attachment uses it, so its
// content can be deleted or the server can stop. The caller holds m.mu.
func (m *Manager) dropIdle(sha string) error {
	s := m.images[sha]
	if s == nil || s.refs > 0 {
		return nil
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	delete(m.images, sha)
	return s.file.Close()
}

// Close closes the base images no session uses; call it once the NBD
// server has stopped.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for sha := range m.images {
		errs = append(errs, m.dropIdle(sha))
	}
	return errors.Join(errs...)
}
