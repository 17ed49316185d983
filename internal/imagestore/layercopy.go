package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bootfleet/bootfleet/internal/durable"
	"github.com/bootfleet/bootfleet/internal/imagelayer"
)

// PutLayerCopy stores the layer r holds, copied from a peer, as content
// want (size bytes as served) over content parent, which must be here.
// The layer appears only once the content read through it and the parent
// hashes to want; a mismatch wraps ErrMismatch and a malformed layer
// imagelayer.ErrFormat. Content already stored is not copied again.
func (s *Store) PutLayerCopy(ctx context.Context, r io.Reader, want, parent string, size int64) (Imported, error) {
	if _, err := s.Path(want); err != nil {
		return Imported{}, err
	}
	if s.Has(want) {
		return Imported{SHA256: want, Size: size, Parent: s.Parent(want)}, nil
	}
	pr, err := s.OpenReader(parent)
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: layer %.12s needs its parent %.12s here first: %w", want, parent, err)
	}
	defer pr.Close()
	tmp, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	path := tmp.Name()
	n, err := copyCtx(ctx, tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	res := Imported{Received: n, Format: Raw}
	if err == nil {
		err = s.checkLayer(ctx, path, want, parent, size, pr)
	}
	if err != nil {
		os.Remove(path)
		return res, err
	}
	if err = os.Chmod(path, 0o440); err == nil {
		err = syncFile(path)
	}
	dst := filepath.Join(s.layerDir(), want)
	if err == nil {
		err = os.Rename(path, dst)
	}
	if err == nil {
		err = durable.SyncDir(s.layerDir())
	}
	if err != nil {
		os.Remove(path)
		return res, fmt.Errorf("imagestore: store layer: %w", err)
	}
	st, err := os.Stat(dst)
	if err != nil {
		return res, fmt.Errorf("imagestore: %w", err)
	}
	res.SHA256, res.Size, res.Allocated, res.Parent = want, size, allocated(st), parent
	return res, nil
}

// checkLayer checks that the layer file at path is a layer over parent
// (read through pr) whose content is size bytes hashing to want.
func (s *Store) checkLayer(ctx context.Context, path, want, parent string, size int64, pr Reader) error {
	f, x, err := OpenLayer(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if x.Parent != parent || x.Size != size || pr.Size() != size {
		return fmt.Errorf("%w: got a layer of %d bytes over %.12s, want %d bytes over %.12s (%d bytes here)",
			ErrMismatch, x.Size, x.Parent, size, parent, pr.Size())
	}
	c, err := imagelayer.NewChain(pr, size, imagelayer.Layer{Index: x, File: f})
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := copyCtx(ctx, h, io.NewSectionReader(c, 0, size)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: the layer reads as content hashing to sha256 %s, want %s", ErrMismatch, got, want)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
