package imagestore

import (
	"bytes"
	"context"
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
	dir     string // DATA/images
	qemuImg string // the command converting images; "qemu-img"
}

// Open returns the store under data, creating DATA/images/sha256 and
// removing temporary files that an interrupted import left behind.
func Open(data string) (*Store, error) {
	s := &Store{dir: filepath.Join(data, "images"), qemuImg: "qemu-img"}
	for _, d := range []string{s.blobDir(), s.tmpDir(), s.layerDir()} {
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

// Has reports whether the content with sha256 hex is stored, whole or as
// a layer.
func (s *Store) Has(hex string) bool {
	p, err := s.Path(hex)
	if err != nil {
		return false
	}
	st, err := os.Stat(p)
	if err == nil && st.Mode().IsRegular() {
		return true
	}
	_, ok := s.layerPath(hex)
	return ok
}

// Imported is what ImportContext stored.
type Imported struct {
	SHA256    string // hex sha256 of the content as served (raw)
	Size      int64  // bytes as served: the virtual size of a converted image
	Allocated int64  // bytes the stored file takes on disk; less than Size when sparse
	Received  int64  // bytes read from the upload
	Format    Format // of the upload
	// Parent is the content the import is stored over as a layer; ""
	// when it is stored whole (see ImportOver).
	Parent string
}

// Import is ImportContext without a context, for callers that want only
// the hash and size (as served).
func (s *Store) Import(r io.Reader) (sum string, size int64, err error) {
	res, err := s.ImportContext(context.Background(), r)
	return res.SHA256, res.Size, err
}

// ImportContext stores the image r holds and returns its hash and sizes.
// A raw image (anything DetectFormat does not recognise) is stored as it
// arrives; a qcow2, qcow, VMDK, VHDX, VHD or VDI image is converted to raw with
// qemu-img once it has all arrived. Either way the stored file is sparse:
// aligned 4 KiB blocks of zeros take no space. The sha256 names the raw
// content, as served.
//
// The content appears under its hash only once it is complete and
// fsynced, so a crash or a broken upload never leaves a partial image
// under a valid name; temporary files are removed on every path, and
// Open removes those a crash left. Importing content already stored is
// cheap on disk: the copy is dropped. Cancelling ctx stops the import,
// qemu-img included.
//
// Errors about the content wrap ErrRefused; ErrNoQemuImg means the
// server needs qemu-img for this upload.
func (s *Store) ImportContext(ctx context.Context, r io.Reader) (Imported, error) {
	path, sum, res, err := s.stage(ctx, r)
	if err != nil {
		return res, err
	}
	st, err := s.commit(path, sum)
	if err != nil {
		return res, err
	}
	res.SHA256, res.Size, res.Allocated = sum, st.Size(), allocated(st)
	return res, nil
}

// stage receives r into a temporary raw file, converting it if needed,
// and returns the file and its sha256; the file is removed on failure.
func (s *Store) stage(ctx context.Context, r io.Reader) (path, sum string, res Imported, err error) {
	up, err := s.receive(ctx, r)
	res = Imported{Format: up.format, Received: up.received}
	if err != nil {
		return "", "", res, err
	}
	path, sum = up.path, up.sum
	if up.format != Raw {
		if path, err = s.convert(ctx, up.path, up.format); err != nil {
			return "", "", res, err
		}
		if sum, err = hashFile(ctx, path); err != nil {
			os.Remove(path)
			return "", "", res, fmt.Errorf("imagestore: hash converted image: %w", err)
		}
	}
	return path, sum, res, nil
}

// upload is an upload received into a temporary file.
type upload struct {
	path     string
	format   Format
	received int64
	sum      string // hex sha256 of a raw upload; empty for other formats
}

// receive copies r into a new temporary file, leaving holes for blocks of
// zeros, and hashes a raw upload on the way. The file is removed on
// failure.
func (s *Store) receive(ctx context.Context, r io.Reader) (up upload, err error) {
	f, err := os.CreateTemp(s.tmpDir(), "import-*")
	if err != nil {
		return up, fmt.Errorf("imagestore: create temporary file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("imagestore: close image: %w", cerr)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	head := make([]byte, HeaderSize)
	n, err := io.ReadFull(r, head)
	up.received = int64(n)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return up, fmt.Errorf("imagestore: copy image after %d bytes: %w", n, err)
	}
	if n == 0 {
		return up, refuse(ErrBadImage, "image is empty; want a disk or filesystem image (raw, qcow2, VMDK, VHDX, VHD or VDI)")
	}
	if up.format, err = DetectFormat(head[:n]); err != nil {
		return up, err
	}
	sw := newSparseWriter(f)
	var dst io.Writer = sw
	h := sha256.New()
	if up.format == Raw {
		dst = io.MultiWriter(sw, h)
	}
	src := io.Reader(bytes.NewReader(head[:n]))
	if n == len(head) { // more may follow the header
		src = io.MultiReader(src, r)
	}
	if up.received, err = copyCtx(ctx, dst, src); err != nil {
		return up, err
	}
	if err := sw.Close(); err != nil {
		return up, fmt.Errorf("imagestore: write image: %w", err)
	}
	up.path = f.Name()
	if up.format == Raw {
		up.sum = hex.EncodeToString(h.Sum(nil))
	}
	return up, nil
}

// copyCtx copies r to w until r ends or ctx is done; it reports n as the
// bytes read from r and read errors as "after N bytes".
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) (n int64, err error) {
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("imagestore: copy image after %d bytes: %w", n, err)
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, fmt.Errorf("imagestore: write image after %d bytes: %w", n, err)
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, fmt.Errorf("imagestore: copy image after %d bytes: %w", n, rerr)
		}
	}
}

// commit makes the complete file at path read-only and durable, and
// stores it under its hash sum, unless that content is already stored.
// It returns the stored file's information and removes path on failure.
func (s *Store) commit(path, sum string) (st os.FileInfo, err error) {
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	if err := os.Chmod(path, 0o440); err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("imagestore: sync image: %w", err)
	}
	dst := filepath.Join(s.blobDir(), sum)
	if lp, ok := s.layerPath(sum); ok { // stored as a layer already
		os.Remove(path)
		dst = lp
	} else if s.Has(sum) {
		os.Remove(path)
	} else {
		if err := os.Rename(path, dst); err != nil {
			return nil, fmt.Errorf("imagestore: store image: %w", err)
		}
		if err := durable.SyncDir(s.blobDir()); err != nil {
			return nil, fmt.Errorf("imagestore: store image: %w", err)
		}
	}
	if st, err = os.Stat(dst); err != nil {
		return nil, fmt.Errorf("imagestore: store image: %w", err)
	}
	return st, nil
}

// Remove deletes the content with sha256 hex, and any partial copy of it;
// missing content is not an error. Callers make sure nothing uses it any more: a machine that has it
// open keeps reading it (the file lives on until closed), but no new boot
// can start from it.
func (s *Store) Remove(hex string) error {
	p, err := s.Path(hex)
	if err != nil {
		return err
	}
	for _, p := range []string{p, s.partialPath(hex), filepath.Join(s.layerDir(), hex)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("imagestore: %w", err)
		}
	}
	return nil
}
