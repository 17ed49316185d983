package images

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

var secret = bytes.Repeat([]byte{7}, 32)

// fleet is one store with peers registered in it, and this server ("self")
// with an empty image store.
type fleet struct {
	t       *testing.T
	store   inventory.Store
	blobs   *imagestore.Store
	boots   *fakeBoots
	log     *testutil.SyncBuffer
	content []byte
	img     inventory.Image
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "inv.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	content := make([]byte, 3<<20+100) // not a multiple of the sparse block
	rand.Read(content[:1<<20])         // the rest stays zero: a hole when stored
	sum := sha256.Sum256(content)
	img, err := st.PutImage(ctx, inventory.Image{Name: "debian", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content))})
	if err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, store: st, blobs: blobs, boots: &fakeBoots{inUse: map[string]bool{}},
		log: &testutil.SyncBuffer{}, content: content, img: img}
}

// peer registers a live server name at url holding the image, with
// nbd sessions as its load (peers are asked least loaded first).
func (f *fleet) peer(name, url string, nbd int, heartbeat time.Time) {
	f.t.Helper()
	ctx := context.Background()
	err := f.store.RegisterServer(ctx, inventory.ServerInfo{Name: name, Addrs: []string{"10.0.0.1", url}, Started: heartbeat,
		Load: inventory.ServerLoad{NBDSessions: nbd}})
	if err == nil {
		err = f.store.AddImageCopy(ctx, inventory.ImageCopy{Server: name, SHA256: f.img.SHA256})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) service(idle time.Duration) *Service {
	f.t.Helper()
	s, err := New(Config{Self: "self", Store: f.store, Blobs: f.blobs, Boots: f.boots,
		Peers:    &imagepeer.Client{Self: "self", Secret: secret, Idle: idle},
		Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(f.log, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { s.cancel(); s.wg.Wait() })
	return s
}

// goodPeer serves the content as a real server does.
func (f *fleet) goodPeer(requests *atomic.Int32) *httptest.Server {
	src, err := imagestore.Open(f.t.TempDir())
	if err != nil {
		f.t.Fatal(err)
	}
	if _, _, err := src.Import(bytes.NewReader(f.content)); err != nil {
		f.t.Fatal(err)
	}
	h := imagepeer.Handler(imagepeer.HandlerConfig{Content: src, Secret: secret})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests != nil {
			requests.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	f.t.Cleanup(srv.Close)
	return srv
}

func peerServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestEnsurePeers fetches through peers that fail in each way before a
// good one, least loaded first, and checks what is stored and logged.
func TestEnsurePeers(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		bad  func(f *fleet) http.HandlerFunc // asked first; nil: none
		// wantLog is in the log when the bad peer was asked.
		wantLog string
	}{
		{"good", nil, ""},
		{"corrupt", func(f *fleet) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				bad := bytes.Clone(f.content)
				bad[12345] ^= 1
				w.Header().Set("Content-Length", "3145828")
				w.Write(bad)
			}
		}, "want " + "3145828 bytes of"},
		{"missing", func(*fleet) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "this server holds no content", http.StatusNotFound)
			}
		}, "got 404 Not Found"},
		{"short", func(f *fleet) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { w.Write(f.content[:1000]) }
		}, "peer sends 1000 bytes"},
		{"slow", func(f *fleet) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "3145828")
				w.Write(f.content[:4096])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			}
		}, "no byte from the peer for 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t)
			if tt.bad != nil {
				f.peer("peer-bad", peerServer(t, tt.bad(f)).URL, 0, now)
			}
			f.peer("peer-good", f.goodPeer(nil).URL, 5, now)
			s := f.service(2 * time.Second) // the slow peer stalls for 10 s
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.Ensure(ctx, f.img.SHA256); err != nil {
				t.Fatalf("Ensure: %v\nlog:\n%s", err, f.log)
			}
			f.checkStored()
			log := f.log.String()
			if !strings.Contains(log, "fetched image content from peer") || !strings.Contains(log, "peer=peer-good") {
				t.Fatalf("log does not say it fetched from peer-good:\n%s", log)
			}
			if tt.bad != nil && (!strings.Contains(log, "peer=peer-bad") || !strings.Contains(log, tt.wantLog)) {
				t.Fatalf("log does not name peer-bad with %q:\n%s", tt.wantLog, log)
			}
			copies, _ := f.store.ListImageCopies(ctx)
			if !hasCopy(copies, "self", f.img.SHA256) {
				t.Fatalf("copies = %+v, want self's recorded", copies)
			}
		})
	}
}

// checkStored checks that the content is stored whole and no temporary
// file is left.
func (f *fleet) checkStored() {
	f.t.Helper()
	p, _ := f.blobs.Path(f.img.SHA256)
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, f.content) {
		f.t.Fatalf("stored content: %d bytes, err %v; want the %d bytes served", len(got), err, len(f.content))
	}
	tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(p)), "tmp", "*"))
	if len(tmp) != 0 {
		f.t.Fatalf("temporary files left: %v", tmp)
	}
}

// TestEnsureFails: every peer fails, or none is live. The error names
// each peer and what it did; nothing is stored.
func TestEnsureFails(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		setup func(f *fleet)
		want  []string
	}{
		{"all bad", func(f *fleet) {
			f.peer("peer-404", peerServer(f.t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }).URL, 0, now)
			f.peer("peer-corrupt", peerServer(f.t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "3145828")
				w.Write(make([]byte, len(f.content)))
			}).URL, 1, now)
		}, []string{"peer-404", "404", "peer-corrupt", "does not match", "want 3145828 bytes of"}},
		{"refused signature", func(f *fleet) {
			h := imagepeer.Handler(imagepeer.HandlerConfig{Content: f.blobs, Secret: bytes.Repeat([]byte{8}, 32)})
			f.peer("peer-other-fleet", peerServer(f.t, h.ServeHTTP).URL, 0, now)
		}, []string{"peer-other-fleet", "401"}},
		{"only stale", func(f *fleet) {
			f.peer("peer-stale", f.goodPeer(nil).URL, 0, now.Add(-time.Minute))
		}, []string{"no live server holds it", "peer-stale (stale)"}},
		{"no name", func(f *fleet) {
			f.peer("peer-good", f.goodPeer(nil).URL, 0, now)
			if err := f.store.DeleteImage(context.Background(), "debian"); err != nil {
				f.t.Fatal(err)
			}
		}, []string{"no image names content"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t)
			tt.setup(f)
			s := f.service(time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := s.Ensure(ctx, f.img.SHA256)
			if err == nil {
				t.Fatal("Ensure succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if f.blobs.Has(f.img.SHA256) {
				t.Fatal("content stored after a failed fetch")
			}
		})
	}
}

// TestEnsureConcurrent: many callers at once cause one transfer.
func TestEnsureConcurrent(t *testing.T) {
	f := newFleet(t)
	var requests atomic.Int32
	f.peer("peer-good", f.goodPeer(&requests).URL, 0, time.Now())
	s := f.service(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Ensure(ctx, f.img.SHA256) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d transfers for 16 callers, want 1", n)
	}
	f.checkStored()
}

// TestEnsureCancel: a caller that gives up returns at once; the fetch
// goes on and the next caller finds the content.
func TestEnsureCancel(t *testing.T) {
	f := newFleet(t)
	release := make(chan struct{})
	good := f.goodPeer(nil)
	f.peer("peer-held", peerServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		r2, _ := http.NewRequestWithContext(r.Context(), "GET", good.URL+r.URL.Path, nil)
		r2.Header = r.Header
		resp, err := http.DefaultClient.Do(r2)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Length", resp.Header.Get("Content-Length"))
		io.Copy(w, resp.Body)
	}).URL, 0, time.Now())
	s := f.service(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Ensure(ctx, f.img.SHA256); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ensure with a 100ms context = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Ensure returned after %v, want about 100ms", took)
	}
	close(release)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := s.Ensure(ctx2, f.img.SHA256); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	f.checkStored()
}

func hasCopy(copies []inventory.ImageCopy, server, sha string) bool {
	for _, c := range copies {
		if c.Server == server && c.SHA256 == sha {
			return true
		}
	}
	return false
}

// fakeBoots is rootdisk: content in inUse is booted from.
type fakeBoots struct {
	mu    sync.Mutex
	inUse map[string]bool
}

func (b *fakeBoots) InUse(sha string, drop func() error) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse[sha] {
		return true, nil
	}
	if drop == nil {
		return false, nil
	}
	return false, drop()
}

func (b *fakeBoots) Users(sha string) []rootdisk.Use {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse[sha] {
		return []rootdisk.Use{{MAC: "52:54:00:00:00:01"}}
	}
	return nil
}

func (b *fakeBoots) set(sha string, inUse bool) {
	b.mu.Lock()
	b.inUse[sha] = inUse
	b.mu.Unlock()
}

// TestEnsureResumes: the only peer cuts the connection after 90% of the
// content; the fetch asks it again for the rest with a Range, receives
// only the missing tenth, and the content is stored whole and verified.
func TestEnsureResumes(t *testing.T) {
	f := newFleet(t)
	good := f.goodPeer(nil)
	cut := int64(len(f.content)) * 9 / 10
	var mu sync.Mutex
	var ranges []string
	var cuts int
	srv := peerServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		first := cuts == 0
		cuts++
		mu.Unlock()
		if !first {
			good.Config.Handler.ServeHTTP(w, r)
			return
		}
		// Promise the whole content, send 90% of it, and drop the
		// connection as a dying server does.
		w.Header().Set("Content-Length", "3145828")
		w.WriteHeader(http.StatusOK)
		w.Write(f.content[:cut])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	})
	f.peer("peer-cut", srv.URL, 0, time.Now())
	s := f.service(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Ensure(ctx, f.img.SHA256); err != nil {
		t.Fatalf("Ensure: %v\nlog:\n%s", err, f.log)
	}
	f.checkStored()
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", fmt.Sprintf("bytes=%d-", cut)}; !slices.Equal(ranges, want) {
		t.Fatalf("requests' Range headers %q, want %q: the whole, then the rest", ranges, want)
	}
	log := f.log.String()
	if !strings.Contains(log, "resuming where it stopped") || !strings.Contains(log, fmt.Sprintf("resumed_at=%d received=%d", cut, int64(len(f.content))-cut)) {
		t.Fatalf("log does not say the fetch resumed at byte %d and received only the rest:\n%s", cut, log)
	}
}
