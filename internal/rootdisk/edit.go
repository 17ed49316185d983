package rootdisk

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// An image version open for maintenance is booted read-write by one
// machine: a persistent overlay in DATA/edits/<image>-<version>/ over the
// content the version was opened on. Its writes become the version's
// content when it is committed (package images reads them through
// CloseEdit); abandoning it deletes the directory.

func (m *Manager) editRoot() string { return filepath.Join(m.cfg.Data, "edits") }

// EditDir is where the writes of maintenance version version of image
// live on this server.
func (m *Manager) EditDir(image string, version int) string {
	return filepath.Join(m.editRoot(), image+"-"+strconv.Itoa(version))
}

// dirOf is the overlay directory boot b of mac opens.
func dirOf(m *Manager, mac net.HardwareAddr, b *boot) string {
	if b.dir != "" {
		return b.dir
	}
	return m.OverlayDir(mac)
}

// OpenEdit makes the directory of a new maintenance version, on content
// sha, so that only this server serves it.
func (m *Manager) OpenEdit(image string, version int, sha string) error {
	dir := m.EditDir(image, version)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("rootdisk: open edit of image %s: %w", image, err)
	}
	if err := os.WriteFile(filepath.Join(dir, baseFile), []byte(sha+"\n"), 0o600); err != nil {
		return fmt.Errorf("rootdisk: open edit of image %s: %w", image, err)
	}
	return nil
}

// IssueEdit starts a boot of mac read-write on maintenance version
// version of img, whose SHA256 is the content the version was opened on.
// The edit must have been opened on this server.
func (m *Manager) IssueEdit(mac net.HardwareAddr, img inventory.Image, version int) (Issued, error) {
	dir := m.EditDir(img.Name, version)
	if _, err := os.Stat(filepath.Join(dir, baseFile)); err != nil {
		return Issued{}, fmt.Errorf("rootdisk: image %s version %d is open for maintenance on another server; boot machine %s from the server that ran image edit", img.Name, version, mac)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cfg.Blobs.Has(img.SHA256) {
		return Issued{}, fmt.Errorf("rootdisk: content %.12s of image %s is missing from the data directory", img.SHA256, img.Name)
	}
	if m.addr == "" {
		return Issued{}, fmt.Errorf("rootdisk: profile root image %s needs the NBD server, which is off; set nbd.listen", img.Name)
	}
	b := &boot{secret: newSecret(), image: img.Name, sha: img.SHA256, mode: blockstore.Persistent, issued: m.cfg.Now(), dir: dir}
	if err := m.saveBoot(mac, b); err != nil {
		return Issued{}, err
	}
	m.boot[mac.String()] = b
	m.log.Info("machine boots an image version read-write for maintenance", "mac", mac.String(), "image", img.Name, "version", version)
	return Issued{Root: m.rootArg(ExportName(mac, b.secret)), SHA256: img.SHA256}, nil
}

// Edited is the disk of a maintenance version: its content as the
// machine left it. Close it when read.
type Edited interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// CloseEdit ends the maintenance boots of version version of image by mac
// and returns its disk, on content sha, to read the version's content
// from. While the machine has it open, it is refused (inventory
// ErrConflict naming the machine) unless force: then the machine's
// sessions are closed under it, and what it had not flushed is lost.
func (m *Manager) CloseEdit(mac net.HardwareAddr, image string, version int, sha string, force bool) (Edited, error) {
	dir := m.EditDir(image, version)
	key := mac.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.boot[key]; b != nil && b.dir == dir {
		delete(m.boot, key) // its export is void: no new session
		if err := m.forgetBoot(mac); err != nil {
			return nil, err
		}
	}
	if a := m.att[key]; a != nil && a.dir == dir {
		if !force {
			return nil, inventory.Conflict("machine", "machine %s is still running image %s version %d (%d NBD session(s)); shut it down first, or pass --force to commit what it has written so far",
				key, image, version, a.refs)
		}
		if err := a.disk.Flush(); err != nil {
			return nil, fmt.Errorf("rootdisk: flush the edit of image %s: %w", image, err)
		}
		a.refs++ // held until the caller closes it
		revoke(a)
		m.log.Warn("maintenance machine's sessions closed to commit its version", "mac", key, "image", image, "version", version)
		return &heldDisk{Disk: a.disk, release: func() error { return m.detach(key, a) }}, nil
	}
	if _, err := os.Stat(filepath.Join(dir, baseFile)); err != nil {
		return nil, fmt.Errorf("rootdisk: image %s version %d was opened for maintenance on another server; commit it there: %w", image, version, err)
	}
	base, err := m.openImage(sha)
	if err != nil {
		return nil, err
	}
	disk, err := blockstore.Open(base, dir, blockstore.Persistent, blockstore.Options{BlockSize: m.cfg.BlockSize, BaseID: sha})
	if err != nil {
		m.closeImage(sha)
		return nil, err
	}
	return &heldDisk{Disk: disk, release: func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		return errors.Join(disk.Close(), m.closeImage(sha))
	}}, nil
}

type heldDisk struct {
	blockstore.Disk
	release func() error
}

func (h *heldDisk) Close() error { return h.release() }

// DropEdit deletes the writes of maintenance version version of image,
// once committed or abandoned.
func (m *Manager) DropEdit(image string, version int) error {
	dir := m.EditDir(image, version)
	if err := removeOverlay(dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rootdisk: %w", err)
	}
	return nil
}
