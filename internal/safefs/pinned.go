package safefs

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// pins are files the admin named in the config (the iPXE binaries), served
// under one exact name each. They exist because Debian's ipxe package ships
// /usr/lib/ipxe/ipxe.efi as a symlink to /boot/ipxe.efi, which the root rules
// rightly refuse for anything a client merely asks for.
type pins struct {
	mu    sync.RWMutex
	paths map[string]string // clean relative name -> resolved absolute path
}

// Pin makes name (as a client would ask for it, e.g. "ipxe.efi") serve the
// regular file at path, following symlinks at this moment only. Only the
// exact name is affected; the root rules still apply to every other name.
// Use it for files the admin configured, never for client input.
func (r *Roots) Pin(name, path string) error {
	rel, err := Clean(name)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("pin %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("pin %s: %s is not a regular file: %w", name, real, ErrForbidden)
	}
	r.pins.mu.Lock()
	defer r.pins.mu.Unlock()
	if r.pins.paths == nil {
		r.pins.paths = map[string]string{}
	}
	r.pins.paths[rel] = real
	return nil
}

// openPinned opens rel if it is pinned; ok is false otherwise.
func (r *Roots) openPinned(rel string) (f *os.File, ok bool, err error) {
	r.pins.mu.RLock()
	p, ok := r.pins.paths[rel]
	r.pins.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	f, err = os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, true, err
	}
	// The admin controls the path, but it may have been replaced by a FIFO
	// or device since it was pinned: check what was actually opened.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, true, fmt.Errorf("pinned %s: %s is no longer a regular file: %w", rel, p, ErrForbidden)
	}
	return f, true, nil
}
