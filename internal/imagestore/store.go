package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Store is the image directory of one data directory. It is safe for
// concurrent use: imports write to private temporary files and rename.
type Store struct {
	dir string // DATA/images
}

// Open returns the store under data, creating DATA/images/sha256 and
// removing temporary files that an interrupted import left behind.
func Open(data string) (*Store, error) {
	s := &Store{dir: filepath.Join(data, "images")}
	for _, d := range []string{s.blobDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("imagestore: %w (set data to a writable directory)", err)
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(s.tmpDir(), "import-*"))
	for _, t := range tmps {
		os.Remove(t)
	}
	return s, nil
}

func (s *Store) blobDir() string { return filepath.Join(s.dir, "sha256") }
func (s *Store) tmpDir() string  { return filepath.Join(s.dir, "tmp") }

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrBadHash means a hash is not 64 lower-case hex digits.
var ErrBadHash = errors.New("imagestore: want a sha256 of 64 lower-case hex digits")

// Path is the file holding the content with sha256 hex, which may not exist.
func (s *Store) Path(hex string) (string, error) {
	if !hexRE.MatchString(hex) {
		return "", fmt.Errorf("%w, got %q", ErrBadHash, hex)
	}
	return filepath.Join(s.blobDir(), hex), nil
}

// Has reports whether the content with sha256 hex is stored.
func (s *Store) Has(hex string) bool {
	p, err := s.Path(hex)
	if err != nil {
		return false
	}
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Import copies r into the store while hashing it, and returns the hex
// sha256 and the size. The content appears under its hash only once it is
// complete and fsynced, so a crash or a broken upload never leaves a
// partial image under a valid name. Importing content already stored is
// cheap on disk: the copy is dropped. Empty content is refused: it cannot
// be a disk.
func (s *Store) Import(r io.Reader) (sum string, size int64, err error) {
	f, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return "", 0, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return "", size, fmt.Errorf("imagestore: copy image after %d bytes: %w", size, err)
	}
	if size == 0 {
		return "", 0, errors.New("imagestore: image is empty; want a raw disk or filesystem image")
	}
	if err = f.Chmod(0o440); err != nil {
		return "", size, fmt.Errorf("imagestore: %w", err)
	}
	if err = f.Sync(); err != nil {
		return "", size, fmt.Errorf("imagestore: sync image: %w", err)
	}
	if err = f.Close(); err != nil {
		return "", size, fmt.Errorf("imagestore: close image: %w", err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	dst := filepath.Join(s.blobDir(), sum)
	if s.Has(sum) {
		os.Remove(f.Name())
		return sum, size, nil
	}
	if err = os.Rename(f.Name(), dst); err != nil {
		return "", size, fmt.Errorf("imagestore: store image: %w", err)
	}
	if err = durable.SyncDir(s.blobDir()); err != nil {
		return "", size, fmt.Errorf("imagestore: store image: %w", err)
	}
	return sum, size, nil
}

// Remove deletes the content with sha256 hex; missing content is not an
// error. Callers make sure nothing uses it any more: a machine that has it
// open keeps reading it (the file lives on until closed), but no new boot
// can start from it.
func (s *Store) Remove(hex string) error {
	p, err := s.Path(hex)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("imagestore: %w", err)
	}
	return nil
}
