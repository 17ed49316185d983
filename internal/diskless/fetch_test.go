package diskless

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// peerFetcher is a Fetcher whose "peer" holds content; nil content
// makes every fetch fail.
type peerFetcher struct {
	blobs   *imagestore.Store
	content []byte
	mu      sync.Mutex
	asked   []string
}

func (f *peerFetcher) Ensure(ctx context.Context, sha string) error {
	f.mu.Lock()
	f.asked = append(f.asked, sha)
	f.mu.Unlock()
	if f.content == nil {
		return errors.New("no live peer gave it")
	}
	_, err := f.blobs.PutCopy(ctx, bytes.NewReader(f.content), 0, sha, int64(len(f.content)))
	return err
}

// TestFetchBeforeServing: a script render, an image kernel and a base
// export of content this server lacks each ask the Fetcher first, and a
// failed fetch says so.
func TestFetchBeforeServing(t *testing.T) {
	content := bytes.Repeat([]byte("root"), 4096)
	sum := sha256.Sum256(content)
	sha := hex.EncodeToString(sum[:])
	key := bytes.Repeat([]byte{5}, 32)
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	tests := []struct {
		name    string
		content []byte // what the peer gives; nil: the fetch fails
	}{{"peer has it", content}, {"fetch fails", nil}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			images := fakeImages{"debian": {Name: "debian", SHA256: sha, Size: int64(len(content))}}
			s, err := New(Config{Data: t.TempDir(), Listen: "127.0.0.1:0", ServerIP: net.IPv4(127, 0, 0, 1), Images: images, BaseKey: key})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f := &peerFetcher{blobs: s.Blobs(), content: tt.content}
			s.SetFetcher(f)

			root, err := s.IssueRoot(t.Context(), mac, inventory.Root{Image: "debian", Overlay: "ephemeral"})
			if tt.content != nil {
				if err != nil || !strings.HasPrefix(root.Arg, "nbd:127.0.0.1:") || !s.Blobs().Has(sha) {
					t.Fatalf("IssueRoot = %+v, %v; want a root on content fetched first", root, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "root image debian is not on this server and fetching it from a peer failed") {
				t.Fatalf("IssueRoot with a failing fetch: %v; want the image named and the fetch's failure", err)
			}

			// Content nobody has: the kernel's request asks the peers,
			// and the answer says the fetch failed.
			_, err = s.Kernels().Open(t.Context(), strings.Repeat("a", 64), "vmlinuz")
			if err == nil || !strings.Contains(err.Error(), "fetching it from a peer failed") {
				t.Fatalf("kernel of content nobody has: %v; want the failed fetch", err)
			}

			other := sha256.Sum256([]byte("other"))
			name := rootdisk.BaseExportName(key, mac, hex.EncodeToString(other[:]))
			if _, err := (fetchingExports{s}).Lookup(name, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err == nil {
				t.Fatal("base export of content nobody has: opened, want refused")
			}
			f.mu.Lock()
			asked := strings.Join(f.asked, ",")
			f.mu.Unlock()
			if !strings.Contains(asked, sha) || !strings.Contains(asked, strings.Repeat("a", 64)) || !strings.Contains(asked, hex.EncodeToString(other[:])) {
				t.Fatalf("the fetcher was asked for %s; want the root's content, the kernel's and the base export's", asked)
			}
		})
	}
}
