package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// TestEditCommitAbandon: a machine edits a version read-write over NBD;
// a commit while it is connected is refused naming it; the commit stores
// what it wrote as a layer of about that size; a second edit while one is
// open is refused naming the holder; an abandon throws the writes away.
func TestEditCommitAbandon(t *testing.T) {
	ctx := context.Background()
	s, st, blobs, disks := editService(t, func(b Blobs) Blobs { return b })
	v1 := bytes.Repeat([]byte("lab image "), 1<<20) // 10 MiB
	imported(t, s, "lab", v1)
	pc1, _ := net.ParseMAC("52:54:00:00:00:01")
	pc2, _ := net.ParseMAC("52:54:00:00:00:02")
	m, err := s.Edit(ctx, "lab", pc1, "alice")
	if err != nil || m.Version != 2 || m.State != inventory.VersionMaintenance || m.Parent != 1 {
		t.Fatalf("Edit = %+v, %v; want version 2 in maintenance over 1", m, err)
	}
	if _, err := s.Edit(ctx, "lab", pc2, "bob"); !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), pc1.String()) {
		t.Fatalf("a second edit: %v, want a conflict naming %s", err, pc1)
	}

	// The machine boots it and writes.
	b, err := disks.IssueEdit(pc1, inventory.Image{Name: "lab", SHA256: m.SHA256, Size: m.Size}, m.Version)
	if err != nil {
		t.Fatal(err)
	}
	e, err := disks.Lookup(strings.TrimPrefix(b.Root, "nbd:10.0.0.1:10809:"), &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9)})
	if err != nil {
		t.Fatal(err)
	}
	wrote := []byte("apt-get upgrade was here")
	if _, err := e.(io.WriterAt).WriteAt(wrote, 3<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "lab", false); !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), pc1.String()) ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("commit while the machine runs: %v, want a conflict naming it and --force", err)
	}
	e.(io.Closer).Close()
	v := committed(t, s, "lab")
	want := bytes.Clone(v1)
	copy(want[3<<20:], wrote)
	sum := sha256.Sum256(want)
	if v.State != inventory.VersionTest || v.SHA256 != hex.EncodeToString(sum[:]) || v.Stored == 0 || v.Stored > 256<<10 {
		t.Fatalf("committed %+v; want test, the content written, a layer of at most 256 KiB", v)
	}
	if blobs.Parent(v.SHA256) != m.SHA256 {
		t.Fatal("the committed version is not stored as a layer over the edited one")
	}
	if _, err := os.Stat(disks.EditDir("lab", 2)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the writes of a committed version are still on disk: %v", err)
	}

	// A second edit goes on top of the newest version, and is abandoned.
	m3, err := s.Edit(ctx, "lab", pc2, "bob")
	if err != nil || m3.Parent != 2 || m3.SHA256 != v.SHA256 {
		t.Fatalf("edit after commit = %+v, %v; want it over version 2", m3, err)
	}
	if _, err := s.Abandon(ctx, "lab", false); err != nil {
		t.Fatal(err)
	}
	vs, _ := st.ListImageVersions(ctx, "lab")
	if len(vs) != 2 {
		t.Fatalf("after abandon: %+v, want versions 1 and 2", vs)
	}
	if _, err := s.Commit(ctx, "lab", false); !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "no maintenance version") {
		t.Fatalf("commit with nothing open: %v", err)
	}
}

// editService is a service of one server whose machines edit versions,
// its blobs wrapped by wrap.
func editService(t *testing.T, wrap func(Blobs) Blobs) (*Service, inventory.Store, *imagestore.Store, *rootdisk.Manager) {
	t.Helper()
	data := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	disks, err := rootdisk.New(rootdisk.Config{Data: data, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	disks.SetAddr("10.0.0.1", 10809)
	s, err := New(Config{Self: "boot-a", Store: st, Blobs: wrap(blobs), Boots: disks, Edits: disks, Peers: &imagepeer.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	return s, st, blobs, disks
}

// cancelOnStore cancels the request that commits as the layer's store
// starts: the client has stopped waiting.
type cancelOnStore struct {
	Blobs
	cancel context.CancelFunc
}

func (c cancelOnStore) StoreLayer(ctx context.Context, content io.ReaderAt, size int64, parent string) (imagestore.Imported, error) {
	c.cancel()
	return c.Blobs.StoreLayer(ctx, content, size, parent)
}

// TestCommitOutlivesTheRequest: a commit whose client goes away while the
// layer is stored still ends with the version in test.
func TestCommitOutlivesTheRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, st, _, _ := editService(t, func(b Blobs) Blobs { return cancelOnStore{b, cancel} })
	imported(t, s, "lab", bytes.Repeat([]byte("lab image "), 1<<16))
	pc1, _ := net.ParseMAC("52:54:00:00:00:01")
	if _, err := s.Edit(ctx, "lab", pc1, "alice"); err != nil {
		t.Fatal(err)
	}
	m, err := s.Commit(ctx, "lab", false)
	if err != nil || m.State != inventory.VersionMaintenance {
		t.Fatalf("commit: %+v, %v; want version 2 still in maintenance while it is stored", m, err)
	}
	if msg := waitCommit(s, "lab"); msg != "" {
		t.Fatalf("commit whose client went away failed: %s", msg)
	}
	if ctx.Err() == nil {
		t.Fatal("the request was not cancelled: the test proves nothing")
	}
	if vs, err := st.ListImageVersions(context.Background(), "lab"); err != nil || len(vs) != 2 || vs[1].State != inventory.VersionTest {
		t.Fatalf("versions after the commit: %+v, %v", vs, err)
	}
}

// committed commits image name and returns the version once stored.
func committed(t *testing.T, s *Service, name string) inventory.ImageVersion {
	t.Helper()
	m, err := s.Commit(context.Background(), name, false)
	if err != nil {
		t.Fatal(err)
	}
	if msg := waitCommit(s, name); msg != "" {
		t.Fatalf("commit of %s version %d: %s", name, m.Version, msg)
	}
	vs, err := s.cfg.Store.ListImageVersions(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Version == m.Version {
			return v
		}
	}
	t.Fatalf("image %s has no version %d after its commit", name, m.Version)
	return m
}

// waitCommit waits for image name's commit to end and returns why it
// failed, or "".
func waitCommit(s *Service, name string) string {
	s.mu.Lock()
	c := s.commits[name]
	s.mu.Unlock()
	<-c.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.Err
}

// gatedStore holds each layer's store until release says, then fails it
// when fail is set.
type gatedStore struct {
	Blobs
	started, release chan struct{}
	fail             *bool
}

func (g gatedStore) StoreLayer(ctx context.Context, content io.ReaderAt, size int64, parent string) (imagestore.Imported, error) {
	g.started <- struct{}{}
	<-g.release
	if *g.fail {
		return imagestore.Imported{}, errors.New("disk full")
	}
	return g.Blobs.StoreLayer(ctx, content, size, parent)
}

// TestCommitInBackground: a commit returns while its layer is stored;
// meanwhile Versions shows it on the version, and a second commit or an
// abandon is refused saying so. A failed commit leaves the version in
// maintenance with the reason shown, and a second commit stores it.
func TestCommitInBackground(t *testing.T) {
	ctx := context.Background()
	fail := true
	g := gatedStore{started: make(chan struct{}), release: make(chan struct{}), fail: &fail}
	s, _, _, _ := editService(t, func(b Blobs) Blobs { g.Blobs = b; return g })
	imported(t, s, "lab", bytes.Repeat([]byte("lab image "), 1<<16))
	pc1, _ := net.ParseMAC("52:54:00:00:00:01")
	if _, err := s.Edit(ctx, "lab", pc1, "alice"); err != nil {
		t.Fatal(err)
	}
	commitShown := func(what string) *Commit {
		t.Helper()
		vs, err := s.Versions(ctx, "lab")
		if err != nil || len(vs) != 2 || vs[1].State != inventory.VersionMaintenance {
			t.Fatalf("%s: versions %+v, %v; want version 2 in maintenance", what, vs, err)
		}
		return vs[1].Commit
	}
	for i, wantErr := range []string{"disk full", ""} {
		m, err := s.Commit(ctx, "lab", false)
		if err != nil || m.Version != 2 || m.State != inventory.VersionMaintenance {
			t.Fatalf("commit %d: %+v, %v; want version 2, in maintenance while it is stored", i+1, m, err)
		}
		<-g.started
		if c := commitShown("while it runs"); c == nil || !c.Finished.IsZero() || c.Total != m.Size {
			t.Fatalf("commit %d while it runs: Versions shows %+v, want it running over %d bytes", i+1, c, m.Size)
		}
		for _, op := range []func(context.Context, string, bool) (inventory.ImageVersion, error){s.Commit, s.Abandon} {
			if _, err := op(ctx, "lab", false); !errors.Is(err, inventory.ErrConflict) || !strings.Contains(err.Error(), "is being committed") {
				t.Errorf("commit %d: a commit or abandon meanwhile: %v, want it refused", i+1, err)
			}
		}
		fail = wantErr != ""
		g.release <- struct{}{}
		if msg := waitCommit(s, "lab"); msg != wantErr {
			t.Fatalf("commit %d ended with %q, want %q", i+1, msg, wantErr)
		}
		if wantErr != "" {
			if c := commitShown("after it failed"); c == nil || c.Err != wantErr {
				t.Fatalf("after a failed commit Versions shows %+v, want its error", c)
			}
		}
	}
	if vs, err := s.Versions(ctx, "lab"); err != nil || vs[1].State != inventory.VersionTest || vs[1].Commit != nil {
		t.Fatalf("after the second commit: %+v, %v; want version 2 in test, no commit shown", vs, err)
	}
}
