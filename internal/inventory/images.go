package inventory

import (
	"context"
	"regexp"
	"time"
)

// Image is a named root disk image. The bytes live in the data
// directory, content-addressed by SHA256 (see internal/imagestore); the
// inventory maps the name to the current content. Re-importing a name
// points it at new content; the old content stays on disk while a
// machine still boots from it.
type Image struct {
	Name     string
	SHA256   string    // lower-case hex, 64 characters
	Size     int64     // bytes
	Imported time.Time // when Name last changed content
	// Version is the current production version (see ImageVersion),
	// whose content SHA256 is; set by the store.
	Version int
}

// Images is the image half of a Store.
type Images interface {
	// ListImages returns every image ordered by name.
	ListImages(ctx context.Context) ([]Image, error)
	GetImage(ctx context.Context, name string) (Image, error)
	// PutImage records img's content as the image's new current
	// production version (AddImageVersion by no one).
	PutImage(ctx context.Context, img Image) (Image, error)
	// DeleteImage deletes the image and all its versions. It fails with
	// ErrConflict while a profile's root uses the image, and with
	// ErrNotFound when there is none by that name.
	DeleteImage(ctx context.Context, name string) error
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks img and fills Imported when zero.
func (img *Image) Validate(now time.Time) error {
	if !pnameRE.MatchString(img.Name) {
		return invalid("name", "want an image name (letters, digits, . _ -, at most 63), got %q", img.Name)
	}
	if !sha256RE.MatchString(img.SHA256) {
		return invalid("sha256", "want 64 lower-case hex digits, got %q", img.SHA256)
	}
	if img.Size <= 0 {
		return invalid("size", "want a positive size in bytes, got %d", img.Size)
	}
	if img.Imported.IsZero() {
		img.Imported = now
	}
	return nil
}
