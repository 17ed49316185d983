package imagekernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/bootfleet/bootfleet/internal/initramfs"
)

// The files built for each image content, in Config.Dir/<sha256>/.
const (
	Vmlinuz = "vmlinuz"
	Initrd  = "initrd.img"
)

// Blobs finds stored image content; *imagestore.Store implements it.
type Blobs interface {
	// Has reports whether the content with hex sha256 sha is stored.
	Has(sha string) bool
	// Flat is a whole raw image file of content sha; done releases it
	// (a version stored as layers is copied whole for the build).
	Flat(ctx context.Context, sha string) (path string, done func(), err error)
}

// BuildFunc writes to w the initramfs for the raw image file image and
// returns what it built, Vmlinuz (the image's kernel) included.
type BuildFunc func(w io.Writer, image string) (initramfs.Result, error)

// Config configures a Builder.
type Config struct {
	// Dir holds the built files: DATA/kernels. Required; created if
	// missing.
	Dir string
	// Blobs holds the image content. Required.
	Blobs Blobs
	// Build makes the files of one image. Default: initramfs.Build with
	// Options.Image, Agent and Busybox, which mounts the image read-only
	// and so needs root.
	Build BuildFunc
	// Agent is the static bootfleet-agent binary put in the initramfs
	// (config nbd.agent). Default: bootfleet-agent next to the running
	// binary.
	Agent string
	// Busybox is a static busybox binary. Default /bin/busybox.
	Busybox string
	// NICDrivers is the admin's list of NIC drivers (config
	// nbd.nic_drivers), read by initramfs.ParseNICDrivers. Default: its
	// default list.
	NICDrivers []string
	Logger     *slog.Logger // default: discard
}

// Builder builds and finds the boot files of image content. Safe for
// concurrent use.
type Builder struct {
	cfg     Config
	log     *slog.Logger
	flights singleflight.Group // by sha256: one build at a time per content
	running sync.WaitGroup     // builds, which Close waits for

	// mu orders a build's publishing against Remove, so files built from
	// content deleted meanwhile are never put in place; it guards names
	// and closed, and running's Add.
	mu     sync.Mutex
	names  map[string]string // sha256 -> image name, for logs
	closed bool
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// New returns a Builder. It removes what an interrupted build left in Dir
// and the files of content no longer stored.
func New(cfg Config) (*Builder, error) {
	if cfg.Dir == "" || cfg.Blobs == nil {
		return nil, errors.New("imagekernel: Dir and Blobs are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Busybox == "" {
		cfg.Busybox = "/bin/busybox"
	}
	if cfg.Agent == "" {
		if self, err := os.Executable(); err == nil {
			cfg.Agent = filepath.Join(filepath.Dir(self), "bootfleet-agent")
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("imagekernel: %w (set data to a writable directory)", err)
	}
	b := &Builder{cfg: cfg, log: cfg.Logger, names: map[string]string{}}
	if b.cfg.Build == nil {
		b.cfg.Build = b.initramfsBuild
	}
	b.sweep()
	return b, nil
}

func (b *Builder) initramfsBuild(w io.Writer, image string) (initramfs.Result, error) {
	nics, err := initramfs.ParseNICDrivers(b.cfg.NICDrivers)
	if err != nil {
		return initramfs.Result{}, fmt.Errorf("nbd.nic_drivers: %w", err)
	}
	return initramfs.Build(w, initramfs.Options{Image: image, Agent: b.cfg.Agent, Busybox: b.cfg.Busybox, NICDrivers: nics, Log: b.log})
}

// sweep removes temporary directories and the files of content gone from
// the store while the server was down.
func (b *Builder) sweep() {
	entries, err := os.ReadDir(b.cfg.Dir)
	if err != nil {
		b.log.Warn("image kernels: list the directory", "dir", b.cfg.Dir, "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] != '.' && (!shaRE.MatchString(name) || b.cfg.Blobs.Has(name)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(b.cfg.Dir, name)); err != nil {
			b.log.Warn("image kernels: remove stale files", "path", filepath.Join(b.cfg.Dir, name), "err", err)
		}
	}
}

func (b *Builder) dir(sha string) string { return filepath.Join(b.cfg.Dir, sha) }

func (b *Builder) built(sha string) bool {
	_, err := os.Stat(b.dir(sha))
	return err == nil
}

// name is the image name last seen for content sha, for logs.
func (b *Builder) name(sha string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.names[sha]; n != "" {
		return n
	}
	return "(unknown name)"
}

// Prepare records that content sha is image name, for log lines, and
// starts building its files in the background unless they are built or
// being built, so a machine's first kernel download does not wait for the
// build. It never blocks.
func (b *Builder) Prepare(name, sha string) {
	if !shaRE.MatchString(sha) {
		return
	}
	b.mu.Lock()
	b.names[sha] = name
	b.mu.Unlock()
	if b.built(sha) || !b.cfg.Blobs.Has(sha) {
		return
	}
	go b.flights.Do(sha, func() (any, error) { return nil, b.build(sha) })
}

// Open opens file (Vmlinuz or Initrd) of content sha, building the files
// first when they are missing: that takes seconds (the image is mounted,
// modules compressed), shared by every request for the same content. An
// error wrapping fs.ErrNotExist means no such file or content; any other
// is a failed build, logged here once per build.
func (b *Builder) Open(ctx context.Context, sha, file string) (*os.File, error) {
	if !shaRE.MatchString(sha) || (file != Vmlinuz && file != Initrd) {
		return nil, fmt.Errorf("imagekernel: want SHA256/%s or SHA256/%s with a sha256 of 64 lower-case hex digits, got %q/%q: %w",
			Vmlinuz, Initrd, sha, file, fs.ErrNotExist)
	}
	if f, err := os.Open(filepath.Join(b.dir(sha), file)); err == nil {
		return f, nil
	}
	if !b.cfg.Blobs.Has(sha) {
		return nil, fmt.Errorf("imagekernel: no image content %.12s in the data directory (removed since the script was served? reboot the machine for a new script): %w", sha, fs.ErrNotExist)
	}
	select {
	case r := <-b.flights.DoChan(sha, func() (any, error) { return nil, b.build(sha) }):
		if r.Err != nil {
			return nil, r.Err
		}
	case <-ctx.Done():
		return nil, ctx.Err() // the build goes on for the next request
	}
	return os.Open(filepath.Join(b.dir(sha), file))
}

// build makes the files of content sha and puts them in place; one runs
// at a time per sha (singleflight).
func (b *Builder) build(sha string) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errors.New("imagekernel: the server is stopping")
	}
	b.running.Add(1)
	b.mu.Unlock()
	defer b.running.Done()
	if b.built(sha) {
		return nil // by the flight that ended between our caller's look and this one
	}
	name := b.name(sha)
	image, done, err := b.cfg.Blobs.Flat(context.Background(), sha)
	if err != nil {
		return err
	}
	defer done()
	start := time.Now()
	b.log.Info("building image kernel", "image", name, "sha256", sha)
	res, err := b.buildFiles(sha, image)
	took := time.Since(start).Round(10 * time.Millisecond).Seconds()
	if err != nil {
		err = fmt.Errorf("imagekernel: build the kernel and initramfs of image %s (sha256 %.12s): %w", name, sha, err)
		b.log.Error("image kernel build failed; the next request tries again", "image", name, "sha256", sha,
			"agent", b.cfg.Agent, "seconds", took, "err", err)
		return err
	}
	b.log.Info("image kernel built", "image", name, "sha256", sha, "kernel", res.KernelVersion,
		"modules", len(res.Modules), "seconds", took)
	return nil
}

// buildFiles builds into a private directory and renames it to Dir/sha,
// so the files appear together and whole.
func (b *Builder) buildFiles(sha, image string) (initramfs.Result, error) {
	tmp, err := os.MkdirTemp(b.cfg.Dir, ".build-"+sha[:12]+"-")
	if err != nil {
		return initramfs.Result{}, err
	}
	defer os.RemoveAll(tmp) // gone already once renamed
	f, err := os.Create(filepath.Join(tmp, Initrd))
	if err != nil {
		return initramfs.Result{}, err
	}
	res, err := b.cfg.Build(f, image)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, err
	}
	if len(res.Vmlinuz) == 0 {
		return res, fmt.Errorf("the build returned no kernel (want the image's /boot/vmlinuz-%s)", res.KernelVersion)
	}
	if err := os.WriteFile(filepath.Join(tmp, Vmlinuz), res.Vmlinuz, 0o644); err != nil {
		return res, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cfg.Blobs.Has(sha) {
		return res, errors.New("the image content was removed during the build")
	}
	if err := os.Rename(tmp, b.dir(sha)); err != nil {
		return res, fmt.Errorf("put the built files in place: %w", err)
	}
	return res, nil
}

// Remove deletes the files of content sha. Call it after the content
// itself is deleted (rootdisk.Manager.Release): a build finishing later
// then finds the content gone and keeps nothing.
func (b *Builder) Remove(sha string) error {
	if !shaRE.MatchString(sha) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.names, sha)
	if err := os.RemoveAll(b.dir(sha)); err != nil {
		return fmt.Errorf("imagekernel: remove the kernel of content %.12s: %w", sha, err)
	}
	return nil
}

// Close waits for the builds under way, so none is cut off with the
// image still mounted, and refuses new ones.
func (b *Builder) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.running.Wait()
}
