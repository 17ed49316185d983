package inventory

import (
	"context"
	"time"
)

// ImageCopy says that a server of the fleet holds image content in its
// own data directory, so it can serve the content and give it to peers.
type ImageCopy struct {
	Server string    // ServerInfo.Name
	SHA256 string    // lower-case hex, 64 characters
	Since  time.Time // when the server recorded it; the store keeps microseconds
}

// ImageCopies is which servers hold which image content. Each server
// writes only its own rows; every server reads them all to find a peer
// to fetch from.
type ImageCopies interface {
	// SetImageCopies replaces every copy server holds with copies (whose
	// Server must be server): a server records what its data directory
	// holds when it starts.
	SetImageCopies(ctx context.Context, server string, copies []ImageCopy) error
	// AddImageCopy records c; recording a copy again keeps its Since.
	AddImageCopy(ctx context.Context, c ImageCopy) error
	// RemoveImageCopy forgets that server holds sha; a copy not recorded
	// is not an error.
	RemoveImageCopy(ctx context.Context, server, sha string) error
	// ListImageCopies returns every copy ordered by SHA256, then Server.
	ListImageCopies(ctx context.Context) ([]ImageCopy, error)
	// ImageHolders returns the registered servers that hold content sha,
	// ordered by name, stale and stopped ones included: callers keep
	// those whose Status(now) is ServerLive.
	ImageHolders(ctx context.Context, sha string) ([]ServerInfo, error)
}

// Validate checks c and cuts Since to the microseconds the store keeps,
// filling it with now when zero.
func (c *ImageCopy) Validate(now time.Time) error {
	if !ValidServerName(c.Server) {
		return invalid("server", "want a server name (letters, digits, . _ -, at most 253), got %q", c.Server)
	}
	if !sha256RE.MatchString(c.SHA256) {
		return invalid("sha256", "want 64 lower-case hex digits, got %q", c.SHA256)
	}
	if c.Since.IsZero() {
		c.Since = now
	}
	c.Since = c.Since.Truncate(time.Microsecond)
	return nil
}
