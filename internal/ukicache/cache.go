package ukicache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/durable"
	"github.com/bootfleet/bootfleet/internal/uki"
)

// ErrNoStub means the configured stub is not there: no images are built.
var ErrNoStub = errors.New("ukicache: no systemd-stub")

// Unused is how long an image stays on disk after it was last opened. A
// changed kernel or initrd names a new image and the old one is never
// opened again; two weeks outlast a lab's weekly reboot, and an image
// removed too early only costs one rebuild.
const Unused = 14 * 24 * time.Hour

// touchEvery bounds how often opening an image records its use on disk
// (its modification time), which outlives a restart.
const touchEvery = time.Hour

// Cache builds and keeps unified kernel images under Dir.
type Cache struct {
	dir, stub string
	log       *slog.Logger

	mu       sync.Mutex
	building map[string]*build
	touched  map[string]time.Time // when an image's use was last recorded
	now      func() time.Time
}

// build is one image being built; done closes when err is set.
type build struct {
	done chan struct{}
	err  error
}

// New returns a cache of images under dir (created on first build) made
// with the stub at stub. A nil log discards.
func New(dir, stub string, log *slog.Logger) *Cache {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{dir: dir, stub: stub, log: log, building: map[string]*build{}, touched: map[string]time.Time{}, now: time.Now}
}

// Stub checks that the stub is a readable regular file; the error wraps
// ErrNoStub when it is not.
func (c *Cache) Stub() error {
	st, err := os.Stat(c.stub)
	if err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%w: want systemd-stub at %s (Debian: apt install systemd-boot-efi), got %v", ErrNoStub, c.stub, err)
	}
	return nil
}

// Size is the size of the image of kernel and initrds, from the cached
// image or, before it is built, from the inputs' headers and sizes.
func (c *Cache) Size(kernel string, initrds []string) (int64, error) {
	name, err := c.name(kernel, initrds)
	if err != nil {
		return 0, err
	}
	if st, err := os.Stat(name); err == nil {
		return st.Size(), nil
	}
	var n int64
	err = withImage(c.stub, kernel, initrds, func(img uki.Image) error {
		n, err = uki.Size(img)
		return err
	})
	return n, err
}

// Open opens the image of kernel and initrds, building it first if it is
// not cached; a build takes about as long as copying the inputs.
func (c *Cache) Open(kernel string, initrds []string) (*os.File, error) {
	name, err := c.name(kernel, initrds)
	if err != nil {
		return nil, err
	}
	if f, err := os.Open(name); err == nil {
		c.touch(name)
		return f, nil
	}
	c.mu.Lock()
	b, running := c.building[name]
	if !running {
		b = &build{done: make(chan struct{})}
		c.building[name] = b
		go func() {
			b.err = c.build(name, kernel, initrds)
			c.mu.Lock()
			delete(c.building, name)
			c.mu.Unlock()
			close(b.done)
		}()
	}
	c.mu.Unlock()
	<-b.done
	if b.err != nil {
		return nil, b.err
	}
	c.touch(name)
	return os.Open(name)
}

// touch records that name was opened now, at most every touchEvery.
func (c *Cache) touch(name string) {
	now := c.now()
	c.mu.Lock()
	due := now.Sub(c.touched[name]) >= touchEvery
	if due {
		c.touched[name] = now
	}
	c.mu.Unlock()
	if due {
		if err := os.Chtimes(name, now, now); err != nil {
			c.log.Warn("unified kernel image: cannot record its use; it may be removed and rebuilt", "file", name, "err", err)
		}
	}
}

// prune removes the images not opened for Unused, and what builds that
// crashed left behind. A server still sending a removed image keeps
// reading it through its open file.
func (c *Cache) prune() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		c.log.Warn("unified kernel images: cannot list them to remove unused ones", "dir", c.dir, "err", err)
		return
	}
	now := c.now()
	for _, e := range entries {
		name := e.Name()
		image, tmp := !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".efi"), strings.HasPrefix(name, ".") && strings.Contains(name, ".efi.tmp")
		if !e.Type().IsRegular() || (!image && !tmp) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := now.Sub(info.ModTime())
		if (image && age < Unused) || (tmp && age < touchEvery) {
			continue
		}
		// A build's temporary file is written as it goes: one an hour
		// old belongs to a build that died.
		path := filepath.Join(c.dir, name)
		if err := os.Remove(path); err != nil {
			c.log.Warn("unified kernel image: cannot remove it", "file", path, "err", err)
			continue
		}
		c.log.Info("unified kernel image removed, unused", "file", path, "days", int(age.Hours()/24))
	}
}

// name is the image's path: Dir/HASH.efi, HASH of the inputs' identities.
func (c *Cache) name(kernel string, initrds []string) (string, error) {
	if err := c.Stub(); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range append([]string{c.stub, kernel}, initrds...) {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("ukicache: input of an image: %w", err)
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("ukicache: want a regular file as input of an image, got %s (%v): %w", p, st.Mode(), fs.ErrInvalid)
		}
		fmt.Fprintf(h, "%q %d %d\n", p, st.Size(), st.ModTime().UnixNano())
	}
	return filepath.Join(c.dir, hex.EncodeToString(h.Sum(nil))+".efi"), nil
}

func (c *Cache) build(name, kernel string, initrds []string) error {
	start := time.Now()
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("ukicache: %w", err)
	}
	var n int64
	err := durable.WriteWith(name, 0o644, func(w io.Writer) error {
		return withImage(c.stub, kernel, initrds, func(img uki.Image) (err error) {
			n, err = uki.Build(w, img)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("ukicache: build %s from %s and %d initrds: %w", filepath.Base(name), kernel, len(initrds), err)
	}
	c.log.Info("unified kernel image built", "file", name, "kernel", kernel, "initrds", len(initrds),
		"bytes", n, "seconds", time.Since(start).Round(10*time.Millisecond).Seconds())
	// A new image is when an older one may have stopped being used.
	c.prune()
	return nil
}

// withImage opens the inputs as a uki.Image for f.
func withImage(stub, kernel string, initrds []string, f func(uki.Image) error) error {
	var blobs []uki.Blob
	for _, p := range append([]string{stub, kernel}, initrds...) {
		fh, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("ukicache: input of an image: %w", err)
		}
		defer fh.Close()
		st, err := fh.Stat()
		if err != nil {
			return fmt.Errorf("ukicache: input of an image: %w", err)
		}
		blobs = append(blobs, uki.Blob{R: fh, Size: st.Size()})
	}
	return f(uki.Image{Stub: blobs[0], Kernel: blobs[1], Initrds: blobs[2:]})
}
