package diskless

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagekernel"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// Fetcher brings image content this server lacks from a peer of its
// fleet; *images.Service implements it.
type Fetcher interface {
	// Ensure returns once content sha is in the image store, or why it
	// cannot be.
	Ensure(ctx context.Context, sha string) error
}

// SetFetcher makes the service fetch image content it lacks before it
// serves it: at the script render of a machine whose root is an image,
// and before building a kernel from an image. Call it before serving.
func (s *Service) SetFetcher(f Fetcher) { s.fetcher = f }

// Blobs is this server's image content.
func (s *Service) Blobs() *imagestore.Store { return s.blobs }

// ensure fetches img's content when it is not here.
func (s *Service) ensure(ctx context.Context, img inventory.Image) error {
	if s.fetcher == nil {
		return nil
	}
	if err := s.fetcher.Ensure(ctx, img.SHA256); err != nil {
		return fmt.Errorf("root image %s is not on this server and fetching it from a peer failed: %w", img.Name, err)
	}
	return nil
}

// fetchingKernels is the kernel builder, fetching the image first.
type fetchingKernels struct {
	*imagekernel.Builder
	s *Service
}

// Open implements httpboot.ImageKernels. A script another server
// rendered may send the machine here for an image this server has not
// fetched yet.
func (k fetchingKernels) Open(ctx context.Context, sha, file string) (*os.File, error) {
	if k.s.fetcher != nil && !k.s.blobs.Has(sha) {
		if _, err := k.s.blobs.Path(sha); err == nil { // a valid hash: worth asking the peers
			if err := k.s.fetcher.Ensure(ctx, sha); err != nil {
				return nil, fmt.Errorf("image content %.12s is not on this server and fetching it from a peer failed: %w", sha, err)
			}
		}
	}
	return k.Builder.Open(ctx, sha, file)
}

// exportFetchWait bounds how long an NBD handshake waits for a fetch; the
// fetch goes on, and the client's retry finds the content.
const exportFetchWait = time.Minute

// fetchingExports is the NBD exports, fetching the content of a read-only
// base export first when it is not here: a script another server
// rendered may name this server among a machine's roots. The name's tag
// is checked after the fetch, by rootdisk; a forged name can at most
// bring an image the store names, which the background fetch brings
// anyway.
type fetchingExports struct{ s *Service }

func (e fetchingExports) Lookup(name string, remote net.Addr) (nbd.Export, error) {
	if _, sha, _, err := rootdisk.ParseBaseExportName(name); err == nil && e.s.fetcher != nil && !e.s.blobs.Has(sha) {
		ctx, cancel := context.WithTimeout(context.Background(), exportFetchWait)
		err := e.s.fetcher.Ensure(ctx, sha)
		cancel()
		if err != nil {
			e.s.log.Warn("nbd export's image is not on this server and fetching it failed", "remote", remote.String(), "sha256", sha, "err", err)
		}
	}
	x, err := e.s.disks.Lookup(name, remote)
	if err != nil {
		return nil, err
	}
	return e.s.learning(name, x), nil
}
