package httpboot

import (
	"context"
	"net/url"
	"os"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Granter hands out the PXE MTFTP group, which carries one file at a
// time because every iPXE listens on it for every mtftp:// file.
// *mtftp.Server implements it.
type Granter interface {
	// Grant says whether a script may name mtftp:// for path (as TFTP
	// serves it), of size bytes (negative: not known yet), and renews
	// path's hold on the group if so.
	Grant(path string, size int64) bool
}

// profilePath is where a profile's files for arch sit, over HTTP and
// TFTP: profiles/NAME, or profiles/NAME/ARCH beside x86_64.
func profilePath(profile, arch string) string {
	p := "profiles/" + url.PathEscape(profile)
	if arch != inventory.ArchX86_64 {
		p += "/" + arch
	}
	return p
}

// localFileSize is the size of a profile's local file; -1 when it cannot
// be read, which the RRQ will find out too.
func localFileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// imageKernelSize is the size of content sha's kernel if it is built;
// -1 while the build runs (the script must not wait for it).
func (s *server) imageKernelSize(sha string) int64 {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := s.Kernels.Open(ctx, sha, kernelFile)
	if err != nil {
		return -1
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	return st.Size()
}
