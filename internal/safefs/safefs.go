package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// ErrNotFound is returned (wrapped, with the name) when no root holds the
// name. It matches fs.ErrNotExist with errors.Is.
var ErrNotFound = fmt.Errorf("file not found in any served root: %w", fs.ErrNotExist)

// ErrForbidden is returned (wrapped, with the rule that refused the name)
// when a name breaks a rule in the package documentation. It matches
// fs.ErrPermission with errors.Is.
var ErrForbidden = fmt.Errorf("path refused: %w", fs.ErrPermission)

// Roots is a read-only, ordered set of root directories. It is safe for
// concurrent use. Close releases the directory descriptors.
type Roots struct {
	roots []root
	pins  pins
}

type root struct {
	path string
	dir  *os.File // opened O_PATH|O_DIRECTORY; the anchor for openat2
}

// New opens every root, which must exist and be a directory. Roots are
// searched in the order given.
func New(roots ...string) (*Roots, error) {
	if len(roots) == 0 {
		return nil, errors.New("safefs: no root directories given; configure at least one (ipxe.dir or tftp.root)")
	}
	r := &Roots{}
	for _, p := range roots {
		d, err := openRoot(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.roots = append(r.roots, root{path: p, dir: d})
	}
	return r, nil
}

// Close releases the root directory descriptors. Files already opened stay
// valid.
func (r *Roots) Close() error {
	var errs []error
	for _, rt := range r.roots {
		errs = append(errs, rt.dir.Close())
	}
	r.roots = nil
	return errors.Join(errs...)
}

// Paths returns the root directories in search order.
func (r *Roots) Paths() []string {
	out := make([]string, len(r.roots))
	for i, rt := range r.roots {
		out[i] = rt.path
	}
	return out
}

// Open returns the regular file called name inside the first root that holds
// it, opened read-only. Errors wrap ErrNotFound or ErrForbidden with the
// reason, except for unexpected I/O errors, which are returned wrapped as
// they are.
func (r *Roots) Open(name string) (*os.File, error) {
	rel, err := Clean(name)
	if err != nil {
		return nil, err
	}
	if f, ok, err := r.openPinned(rel); ok {
		return f, err
	}
	for _, rt := range r.roots {
		f, err := openBeneath(rt, rel)
		if errors.Is(err, errNoEntry) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("%q: %w", name, ErrNotFound)
}

// errNoEntry means "not in this root, try the next one".
var errNoEntry = errors.New("no such entry in this root")

// Clean applies the name rules and returns the path relative to a root. It
// never touches the file system.
func Clean(name string) (string, error) {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == 0:
			return "", fmt.Errorf("%q: NUL byte at offset %d: %w", name, i, ErrForbidden)
		case c == '\\':
			return "", fmt.Errorf("%q: backslash at offset %d (use / as separator): %w", name, i, ErrForbidden)
		case c < 0x20 || c == 0x7f:
			return "", fmt.Errorf("%q: control character 0x%02x at offset %d: %w", name, c, i, ErrForbidden)
		}
	}
	rel := strings.TrimPrefix(name, "/")
	if strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("%q: absolute path (only one leading / is accepted): %w", name, ErrForbidden)
	}
	if rel == "" {
		return "", fmt.Errorf("%q: empty file name: %w", name, ErrForbidden)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("%q: \"..\" component: %w", name, ErrForbidden)
		}
	}
	if strings.HasSuffix(rel, "/") {
		return "", fmt.Errorf("%q: names a directory: %w", name, ErrForbidden)
	}
	return rel, nil
}
