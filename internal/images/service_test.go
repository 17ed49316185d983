package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("after 10 s: %s", what)
}

// TestCheck runs the periodic check through an image's life on one
// server: recorded at start, fetched in the background when it appears,
// kept while a machine uses it after its name is removed, deleted after.
// Content the store never knew is kept.
func TestCheck(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	f.peer("peer-good", f.goodPeer(nil).URL, 0, time.Now())
	foreign, _, err := f.blobs.Import(bytes.NewReader([]byte("content from another store, never named here")))
	if err != nil {
		t.Fatal(err)
	}
	s := f.service(time.Second)
	s.Check(ctx)
	copies, _ := f.store.ListImageCopies(ctx)
	if !hasCopy(copies, "self", foreign) {
		t.Fatalf("copies after the first check = %+v, want what self held at start", copies)
	}
	waitFor(t, "the background fetch stores the image", func() bool { return f.blobs.Has(f.img.SHA256) })
	f.checkStored()
	if !strings.Contains(f.log.String(), "fetching a new image in the background") {
		t.Fatalf("log does not say it fetched in the background:\n%s", f.log)
	}

	// The image is removed (on another server); a machine here still
	// boots from it.
	if err := f.store.DeleteImage(ctx, "debian"); err != nil {
		t.Fatal(err)
	}
	f.boots.set(f.img.SHA256, true)
	s.Check(ctx)
	if !f.blobs.Has(f.img.SHA256) {
		t.Fatal("content deleted while a machine boots from it")
	}
	f.boots.set(f.img.SHA256, false)
	s.Check(ctx)
	if f.blobs.Has(f.img.SHA256) {
		t.Fatalf("content kept after its name was removed and no machine uses it\n%s", f.log)
	}
	copies, _ = f.store.ListImageCopies(ctx)
	if hasCopy(copies, "self", f.img.SHA256) {
		t.Fatalf("copies = %+v, want self's copy forgotten", copies)
	}
	if !f.blobs.Has(foreign) {
		t.Fatal("content the store never named was deleted")
	}
}

// checkFirst runs a check of s before every PutImage: the check that
// reads the names between an import's content and its name.
type checkFirst struct {
	Store
	s *Service
}

func (c checkFirst) PutImage(ctx context.Context, img inventory.Image) (inventory.Image, error) {
	c.s.Check(ctx)
	return c.Store.PutImage(ctx, img)
}

// TestCheckGrace: content imported here is not deleted by a check that
// runs before its name is recorded.
func TestCheckGrace(t *testing.T) {
	f := newFleet(t)
	s := f.service(time.Second)
	// Set before the first check: its background fetch reads the store.
	s.cfg.Store = checkFirst{f.store, s}
	s.Check(context.Background())
	res, err := s.Import(context.Background(), Upload{Name: "alpine", Body: bytes.NewReader([]byte("just imported; its name comes next"))})
	if err != nil {
		t.Fatal(err)
	}
	if !f.blobs.Has(res.Image.SHA256) {
		t.Fatal("content deleted within Grace of its import")
	}
	copies, _ := f.store.ListImageCopies(context.Background())
	if !hasCopy(copies, "self", res.Image.SHA256) {
		t.Fatalf("copies after import = %+v, want self's recorded", copies)
	}
	s.cfg.Grace = -1 // the check after Grace: the name keeps it
	s.Check(context.Background())
	if !f.blobs.Has(res.Image.SHA256) {
		t.Fatal("named content deleted by a check")
	}
}

// failingStore fails every read of the images.
type failingStore struct{ Store }

func (failingStore) ListImageVersions(context.Context, string) ([]inventory.ImageVersion, error) {
	return nil, errors.New("connection refused")
}

// TestCheckStoreDown: a store that cannot be read is logged once, not at
// every check, and nothing local is deleted meanwhile.
func TestCheckStoreDown(t *testing.T) {
	f := newFleet(t)
	s := f.service(time.Second)
	s.cfg.Store = failingStore{f.store}
	for range 5 {
		s.Check(context.Background())
	}
	if n := strings.Count(f.log.String(), "reading the images failed"); n != 1 {
		t.Fatalf("%d log lines for 5 failed checks, want 1:\n%s", n, f.log)
	}
	s.cfg.Store = f.store
	s.Check(context.Background())
	if !strings.Contains(f.log.String(), "the store answers again") {
		t.Fatalf("no line when the store answered again:\n%s", f.log)
	}
}

// TestBackgroundRetry: a background fetch that keeps failing is tried
// again after Retry, then after twice as long, and so on.
func TestBackgroundRetry(t *testing.T) {
	f := newFleet(t) // the image, and no peer holds it
	now := time.Unix(1_800_000_000, 0)
	s := f.service(time.Second)
	s.cfg.Now = func() time.Time { return now }
	attempts := func() int { return strings.Count(f.log.String(), "background fetch failed") }
	check := func(after time.Duration, want int) {
		t.Helper()
		now = now.Add(after)
		s.Check(context.Background())
		waitFor(t, fmt.Sprintf("%d failed background fetches", want), func() bool { return attempts() == want })
		time.Sleep(50 * time.Millisecond) // no attempt beyond want
		if n := attempts(); n != want {
			t.Fatalf("%d failed fetches, want %d", n, want)
		}
	}
	check(0, 1)
	check(59*time.Second, 1) // Retry is 1 min
	check(2*time.Second, 2)
	check(time.Minute, 2) // now 2 min
	check(61*time.Second, 3)
	if !strings.Contains(f.log.String(), "retry_in=4m0s") {
		t.Fatalf("third failure does not wait 4 min:\n%s", f.log)
	}
}

// TestCheckRacesFetch: a check whose read of the images is older than a
// fetch's keeps the fetched copy, though its list does not name it.
func TestCheckRacesFetch(t *testing.T) {
	f := newFleet(t)
	f.peer("peer-good", f.goodPeer(nil).URL, 0, time.Now())
	s := f.service(time.Second)
	s.Check(context.Background()) // fetches in the background
	waitFor(t, "the background fetch", func() bool { return f.blobs.Has(f.img.SHA256) })
	// A check that read the images before the fetch did, and saw none.
	s.mu.Lock()
	s.known[f.img.SHA256] = true
	listed := s.named[f.img.SHA256].Add(-time.Millisecond)
	s.mu.Unlock()
	if !s.fresh(f.img.SHA256, listed) {
		t.Fatal("a check older than the fetch may delete the fetched copy")
	}
	if s.fresh(f.img.SHA256, time.Now()) {
		t.Fatal("a check newer than the fetch may not delete the copy of an image since removed")
	}
}

// gatedCopies holds the first SetImageCopies until release is closed.
type gatedCopies struct {
	Store
	entered, release chan struct{}
}

func (g gatedCopies) SetImageCopies(ctx context.Context, server string, copies []inventory.ImageCopy) error {
	close(g.entered)
	<-g.release
	return g.Store.SetImageCopies(ctx, server, copies)
}

// TestRecordRacesImport: an import that lands while the first check
// replaces this server's copies from an older listing of the image
// store is still recorded when both are done, so peers can fetch it.
func TestRecordRacesImport(t *testing.T) {
	f := newFleet(t)
	s := f.service(time.Second)
	g := gatedCopies{f.store, make(chan struct{}), make(chan struct{})}
	s.cfg.Store = g
	checked := make(chan struct{})
	go func() { s.Check(context.Background()); close(checked) }()
	select { // the check listed an empty image store
	case <-g.entered:
	case <-checked:
		t.Fatalf("the check did not record this server's copies\n%s", f.log)
	}
	imports := make(chan error, 1)
	var res Imported
	go func() {
		var err error
		res, err = s.Import(context.Background(), Upload{Name: "alpine", Body: bytes.NewReader(contentA)})
		imports <- err
	}()
	// Without the lock the import's row is written here, before the
	// check's replacement; with it the import waits for the check.
	var err error
	imported := false
	select {
	case err = <-imports:
		imported = true
	case <-time.After(300 * time.Millisecond):
	}
	close(g.release)
	<-checked
	if !imported {
		err = <-imports
	}
	if err != nil {
		t.Fatal(err)
	}
	copies, _ := f.store.ListImageCopies(context.Background())
	if !hasCopy(copies, "self", res.Image.SHA256) {
		t.Fatalf("copies after an import racing the first check = %+v, want self's copy of %.12s", copies, res.Image.SHA256)
	}
}
