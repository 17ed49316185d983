package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Merge stores content sha, kept as layers, as a whole file again under
// the same hash, then deletes its own layer file: one read through the
// chain, the copy hashed against sha before it replaces anything.
// Machines reading the layers meanwhile go on reading them (open files
// outlive their names); the next open reads the whole file. progress, if
// set, is called after every MiB copied with the bytes done and the
// total. Content stored whole already is left as it is.
func (s *Store) Merge(ctx context.Context, sha string, progress func(done, total int64)) (Imported, error) {
	c, err := s.Chain(sha)
	if err != nil {
		return Imported{}, err
	}
	if len(c.Layers) == 0 {
		return Imported{SHA256: sha}, nil
	}
	r, err := s.OpenReader(sha)
	if err != nil {
		return Imported{}, err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(s.tmpDir(), "merge-*")
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	path := tmp.Name()
	h := sha256.New()
	sw := newSparseWriter(tmp)
	pw := &progressWriter{w: io.MultiWriter(sw, h), total: r.Size(), f: progress}
	_, err = copyCtx(ctx, pw, io.NewSectionReader(r, 0, r.Size()))
	if err == nil {
		err = sw.Close()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != sha {
		err = fmt.Errorf("%w: layers of %.12s read as content hashing to %x; the layers are damaged, import the image again",
			ErrMismatch, sha, h.Sum(nil))
	}
	if err == nil {
		err = os.Chmod(path, 0o440)
	}
	if err == nil {
		err = syncFile(path)
	}
	if err == nil {
		err = os.Rename(path, filepath.Join(s.blobDir(), sha))
	}
	if err == nil {
		err = durable.SyncDir(s.blobDir())
	}
	if err != nil {
		os.Remove(path)
		return Imported{}, fmt.Errorf("imagestore: merge %.12s: %w", sha, err)
	}
	if err := os.Remove(c.Layers[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Imported{}, fmt.Errorf("imagestore: merge %.12s: %w", sha, err)
	}
	st, err := os.Stat(filepath.Join(s.blobDir(), sha))
	if err != nil {
		return Imported{}, fmt.Errorf("imagestore: %w", err)
	}
	return Imported{SHA256: sha, Size: st.Size(), Allocated: allocated(st), Format: Raw}, nil
}

// progressWriter reports every MiB written.
type progressWriter struct {
	w           io.Writer
	done, total int64
	f           func(done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	before := p.done
	p.done += int64(n)
	if p.f != nil && (p.done>>20 != before>>20 || p.done == p.total) {
		p.f(p.done, p.total)
	}
	return n, err
}
