package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

var (
	// ErrRefused is wrapped by every import error that is the uploader's
	// to fix (a damaged image, one naming other files, an empty upload);
	// the message says what arrived and what to send instead.
	ErrRefused = imagestore.ErrRefused
	// ErrNoQemuImg: the upload needs converting and this server has no
	// qemu-img. It is the server's admin to fix, not the uploader.
	ErrNoQemuImg = imagestore.ErrNoQemuImg
)

// Upload is an image to import.
type Upload struct {
	// Name is the image's name; importing a name that exists points it at
	// the new content, for the next boots.
	Name string
	// Body is the image, raw or in a format imagestore converts; it is
	// read to its end.
	Body io.Reader
	// By names who imports it (the API token), for the version's record.
	By string
	// State is the new version's: production (the default) makes it what
	// machines boot next, as an import always did; test leaves
	// production as it is, for machines following the test channel. The
	// first version of a name is production whatever State says.
	State inventory.VersionState
}

// Imported is what Import stored.
type Imported struct {
	Image   inventory.Image        // as recorded, after the import
	Version inventory.ImageVersion // the version the import made
	// Replaced says the name existed; its earlier content is released.
	Replaced  bool
	Format    imagestore.Format // of the upload
	Allocated int64             // bytes the stored content takes on this server's disk
	Received  int64             // bytes read from the upload
}

// Import stores up's content on this server, records the copy (so peers
// can fetch it at once) and then the name. Errors about the upload wrap
// ErrRefused, a missing qemu-img is ErrNoQemuImg, a bad name an
// inventory.ErrInvalid error; cancelling ctx stops the import.
func (s *Service) Import(ctx context.Context, up Upload) (Imported, error) {
	probe := inventory.Image{Name: up.Name, SHA256: fmt.Sprintf("%064x", 0), Size: 1}
	if err := probe.Validate(s.cfg.Now()); err != nil {
		return Imported{}, err
	}
	switch up.State {
	case "":
		up.State = inventory.VersionProduction
	case inventory.VersionProduction, inventory.VersionTest:
	default:
		return Imported{}, inventory.Invalid("state", "an import makes a test or production version, not %q", up.State)
	}
	old, err := s.cfg.Store.GetImage(ctx, up.Name)
	if err != nil && !errors.Is(err, inventory.ErrNotFound) {
		return Imported{}, err
	}
	start := s.cfg.Now()
	var res imagestore.Imported
	if old.SHA256 != "" && s.cfg.Blobs.Has(old.SHA256) {
		// A rebuilt image costs its delta: the blocks that differ from
		// the current version are stored as a layer over it.
		res, err = s.cfg.Blobs.ImportOver(ctx, up.Body, old.SHA256)
	} else {
		res, err = s.cfg.Blobs.ImportContext(ctx, up.Body)
	}
	out := Imported{Replaced: old.SHA256 != "", Format: res.Format, Allocated: res.Allocated, Received: res.Received}
	if err != nil {
		return out, s.importError(up.Name, res, err)
	}
	s.mu.Lock()
	s.arrived[res.SHA256] = s.cfg.Now()
	s.mu.Unlock()
	s.arrive(ctx, res.SHA256)
	parent := 0
	if res.Parent != "" {
		parent = old.Version
	}
	out.Version, err = s.cfg.Store.AddImageVersion(ctx, inventory.ImageVersion{Image: up.Name, SHA256: res.SHA256, Size: res.Size,
		Parent: parent, State: up.State, By: up.By, Made: s.cfg.Now(), Stored: res.Allocated})
	if err != nil {
		return out, err
	}
	if out.Image, err = s.cfg.Store.GetImage(ctx, up.Name); err != nil {
		return out, err
	}
	s.log.Info("image imported", "name", up.Name, "version", out.Version.Version, "parent", parent, "state", string(out.Version.State), "sha256", res.SHA256,
		"format", res.Format.String(), "size", res.Size, "allocated", res.Allocated, "received", res.Received,
		"seconds", s.cfg.Now().Sub(start).Seconds())
	if out.Replaced && old.SHA256 != out.Image.SHA256 {
		s.release(ctx, old.SHA256)
	}
	return out, nil
}

// importError sorts a failed import: nothing received is the uploader's
// mistake whatever the reader said; a missing qemu-img is logged here,
// since the one reading the answer may not be the admin who can fix it.
func (s *Service) importError(name string, res imagestore.Imported, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, ErrRefused):
		return err
	case errors.Is(err, ErrNoQemuImg):
		s.log.Error("image import needs qemu-img", "name", name, "format", res.Format.String(), "err", err)
		return err
	case res.Received == 0:
		return refused{err}
	}
	return fmt.Errorf("import image %s: %w", name, err)
}

// refused is an upload error imagestore did not class as the uploader's.
type refused struct{ err error }

func (e refused) Error() string   { return e.err.Error() }
func (e refused) Unwrap() []error { return []error{ErrRefused, e.err} }

// Remove deletes image name, then its content unless another name or a
// machine of this server still uses it (the rules are in the package
// doc); other servers delete their copies at their next check. It fails
// with an inventory.ErrConflict error while a profile's root names the
// image and an inventory.ErrNotFound one when no image has the name.
// Content that cannot be deleted now costs only disk space: it is logged,
// and every check tries again.
func (s *Service) Remove(ctx context.Context, name string) error {
	img, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteImage(ctx, name); err != nil {
		return err
	}
	s.log.Info("image removed", "name", name, "sha256", img.SHA256)
	s.release(ctx, img.SHA256)
	return nil
}

// release deletes content sha unless an image still names it. A name
// moved on by a request that has since ended still releases its content.
func (s *Service) release(ctx context.Context, sha string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	imgs, err := s.contents(ctx)
	if err != nil {
		s.log.Warn("image content kept: reading the image versions failed; the next check tries again", "sha256", sha, "err", err)
		return
	}
	if slices.ContainsFunc(imgs, func(img inventory.Image) bool { return img.SHA256 == sha }) {
		return
	}
	s.drop(sha)
}

// drop deletes content no image names, with the kernels built from it,
// unless a machine of this server boots from it, and forgets this
// server's copy in the store. A store that cannot be written then leaves
// a row that names content this server lacks; a peer asking for it gets
// 404 and asks the next, and the next start replaces the rows.
func (s *Service) drop(sha string) {
	inUse, err := s.cfg.Boots.InUse(sha, func() error { return s.cfg.Blobs.Remove(sha) })
	switch {
	case err != nil:
		s.log.Warn("image copies: deleting content no image names failed", "sha256", sha, "err", err)
		return
	case inUse:
		s.mu.Lock()
		first := !s.kept[sha]
		s.kept[sha] = true
		s.mu.Unlock()
		if first {
			s.log.Info("image copies: content no image names is kept while machines boot from it", "sha256", sha)
		}
		return
	}
	if s.cfg.Kernels != nil {
		if err := s.cfg.Kernels.Remove(sha); err != nil {
			s.log.Warn("image kernel files kept", "sha256", sha, "err", err)
		}
	}
	s.mu.Lock()
	delete(s.kept, sha)
	delete(s.arrived, sha)
	delete(s.named, sha)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	s.rows.Lock()
	defer s.rows.Unlock()
	if err := s.cfg.Store.RemoveImageCopy(ctx, s.cfg.Self, sha); err != nil {
		s.log.Warn("image copies: forgetting a deleted copy in the store failed", "sha256", sha, "err", err)
	}
	s.log.Info("image copies: deleted content no image names any more", "sha256", sha, "server", s.cfg.Self)
}

// arrive records that content sha is now here.
func (s *Service) arrive(ctx context.Context, sha string) {
	s.mu.Lock()
	s.known[sha] = true
	delete(s.failed, sha)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	s.rows.Lock()
	defer s.rows.Unlock()
	if err := s.cfg.Store.AddImageCopy(ctx, inventory.ImageCopy{Server: s.cfg.Self, SHA256: sha, Since: s.cfg.Now()}); err != nil {
		s.log.Warn("image copies: recording a copy in the store failed; peers learn of it at this server's next start",
			"sha256", sha, "err", err)
	}
}
