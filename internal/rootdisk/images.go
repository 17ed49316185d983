package rootdisk

import (
	"github.com/bootfleet/bootfleet/internal/blockstore"
)

// sharedImage is one open base image and the attachments using it.
type sharedImage struct {
	file *blockstore.File
	refs int
}

// openImage returns the open base image of blob sha at path, opening it
// for the first machine that boots it. Every machine then shares one
// descriptor and one mapping (blockstore.File.MappedSpan), so the page
// tables for an image's mapping are built once, not once per machine.
// The caller holds m.mu.
func (m *Manager) openImage(sha, path string) (*blockstore.File, error) {
	if s := m.images[sha]; s != nil {
		s.refs++
		s.file.SetSharers(s.refs)
		return s.file, nil
	}
	f, err := blockstore.OpenImage(path)
	if err != nil {
		return nil, err
	}
	f.SetSharers(1)
	m.images[sha] = &sharedImage{file: f, refs: 1}
	return f, nil
}

// closeImage lets go of blob sha's image; the last user closes it. The
// caller holds m.mu.
func (m *Manager) closeImage(sha string) error {
	s := m.images[sha]
	if s == nil {
		return nil
	}
	if s.refs--; s.refs > 0 {
		s.file.SetSharers(s.refs)
		return nil
	}
	delete(m.images, sha)
	return s.file.Close()
}
