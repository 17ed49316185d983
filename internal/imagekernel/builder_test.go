package imagekernel

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/initramfs"
)

// blobs is an in-memory Blobs: stored content is a set of sha256s.
type blobs struct {
	mu  sync.Mutex
	has map[string]bool
}

func newBlobs(shas ...string) *blobs {
	b := &blobs{has: map[string]bool{}}
	for _, s := range shas {
		b.has[s] = true
	}
	return b
}

func (b *blobs) Has(sha string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.has[sha]
}

func (b *blobs) Flat(_ context.Context, sha string) (string, func(), error) {
	return "/images/" + sha, func() {}, nil
}

func (b *blobs) remove(sha string) {
	b.mu.Lock()
	delete(b.has, sha)
	b.mu.Unlock()
}

var (
	shaA = strings.Repeat("a", 64)
	shaB = strings.Repeat("b", 64)
)

// fakeBuild counts builds; each waits for gate (when set) after writing
// half its initramfs, and fails while fail is set.
type fakeBuild struct {
	calls   atomic.Int32
	started chan string // gets the image of each build, when set
	gate    chan struct{}
	fail    atomic.Bool
}

func (f *fakeBuild) build(w io.Writer, image string) (initramfs.Result, error) {
	f.calls.Add(1)
	io.WriteString(w, "initramfs of ")
	if f.started != nil {
		f.started <- image
	}
	if f.gate != nil {
		<-f.gate
	}
	if f.fail.Load() {
		return initramfs.Result{}, errors.New("mount: permission denied")
	}
	io.WriteString(w, image)
	return initramfs.Result{KernelVersion: "9.9.9-test", Modules: []string{"nbd"}, Vmlinuz: []byte("kernel of " + image)}, nil
}

func newBuilder(t *testing.T, bl Blobs, f *fakeBuild) (*Builder, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "kernels")
	b, err := New(Config{Dir: dir, Blobs: bl, Build: f.build})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, dir
}

func readAll(t *testing.T, f *os.File, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustRead opens file of content sha and returns its bytes.
func mustRead(t *testing.T, b *Builder, sha, file string) string {
	t.Helper()
	f, err := b.Open(context.Background(), sha, file)
	return readAll(t, f, err)
}

// TestOpenSharesOneBuild: concurrent requests for the same content wait
// for one build, and nothing is in place until it is whole.
func TestOpenSharesOneBuild(t *testing.T) {
	f := &fakeBuild{started: make(chan string, 1), gate: make(chan struct{})}
	b, dir := newBuilder(t, newBlobs(shaA), f)
	const n = 16
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := Vmlinuz
			if i%2 == 1 {
				file = Initrd
			}
			r, err := b.Open(context.Background(), shaA, file)
			if errs[i] = err; err != nil {
				return
			}
			defer r.Close()
			data, err := io.ReadAll(r)
			got[i], errs[i] = string(data), err
		}()
	}
	<-f.started
	// Mid-build: half an initramfs is written, but not where it is served.
	if _, err := os.Stat(filepath.Join(dir, shaA)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the content's directory exists during its build: %v", err)
	}
	close(f.gate)
	wg.Wait()
	for i := range n {
		want := "kernel of /images/" + shaA
		if i%2 == 1 {
			want = "initramfs of /images/" + shaA
		}
		if errs[i] != nil || got[i] != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got[i], errs[i], want)
		}
	}
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d builds for %d concurrent requests, want 1", c, n)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != shaA {
		t.Fatalf("kernels directory holds %v, want only %s (no temporary leftovers)", entries, shaA)
	}
	// Built once: later requests read the files.
	mustRead(t, b, shaA, Initrd)
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d builds after a later request, want still 1", c)
	}
}

// TestFailedBuildIsRetried: a failure goes to the request and is not
// remembered; the next request builds again.
func TestFailedBuildIsRetried(t *testing.T) {
	f := &fakeBuild{}
	f.fail.Store(true)
	b, dir := newBuilder(t, newBlobs(shaA), f)
	b.Prepare("debian", shaA) // a background build fails the same way
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := b.Open(context.Background(), shaA, Vmlinuz)
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "image debian") || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("failed build: %v, want an error naming the image and the cause", err)
	}
	if _, err := os.Stat(filepath.Join(dir, shaA)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed build left files in place: %v", err)
	}
	calls := f.calls.Load()
	f.fail.Store(false)
	if got := mustRead(t, b, shaA, Vmlinuz); got != "kernel of /images/"+shaA {
		t.Fatalf("after the cause is fixed: %q", got)
	}
	if c := f.calls.Load(); c != calls+1 {
		t.Fatalf("%d builds, want %d: the retry must build again", c, calls+1)
	}
}

func TestOpenRefuses(t *testing.T) {
	f := &fakeBuild{}
	b, _ := newBuilder(t, newBlobs(shaA), f)
	for _, tt := range []struct{ name, sha, file string }{
		{"content not stored", shaB, Vmlinuz},
		{"short sha", "abc", Vmlinuz},
		{"path in sha", "../" + shaA[3:], Vmlinuz},
		{"upper-case sha", strings.ToUpper(shaA), Vmlinuz},
		{"other file", shaA, "config"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := b.Open(context.Background(), tt.sha, tt.file); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("got %v, want fs.ErrNotExist", err)
			}
		})
	}
	if c := f.calls.Load(); c != 0 {
		t.Fatalf("%d builds for refused requests, want 0", c)
	}
}

// TestOpenGivesUpWithItsContext: a request that ends stops waiting; the
// build goes on for the next one.
func TestOpenGivesUpWithItsContext(t *testing.T) {
	f := &fakeBuild{started: make(chan string, 1), gate: make(chan struct{})}
	b, _ := newBuilder(t, newBlobs(shaA), f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := b.Open(ctx, shaA, Vmlinuz)
		done <- err
	}()
	<-f.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(f.gate)
	mustRead(t, b, shaA, Vmlinuz)
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d builds, want 1", c)
	}
}

// TestPrepareBuildsInBackground: the build starts before any request.
func TestPrepareBuildsInBackground(t *testing.T) {
	f := &fakeBuild{}
	b, dir := newBuilder(t, newBlobs(shaA), f)
	b.Prepare("debian", shaA)
	b.Prepare("debian", shaB) // not stored: nothing to build
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, shaA, Initrd)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Prepare built nothing within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Prepare("debian", shaA) // built: no second build
	mustRead(t, b, shaA, Vmlinuz)
	if c := f.calls.Load(); c != 1 {
		t.Fatalf("%d builds, want 1", c)
	}
}

// TestRemove: the files of released content go, and a build that ends
// after its content was removed keeps nothing.
func TestRemove(t *testing.T) {
	f := &fakeBuild{}
	bl := newBlobs(shaA, shaB)
	b, dir := newBuilder(t, bl, f)
	mustRead(t, b, shaA, Vmlinuz)
	bl.remove(shaA)
	if err := b.Remove(shaA); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, shaA)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("files of removed content: %v", err)
	}
	if _, err := b.Open(context.Background(), shaA, Vmlinuz); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of removed content: %v, want fs.ErrNotExist", err)
	}

	f.started, f.gate = make(chan string, 1), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := b.Open(context.Background(), shaB, Vmlinuz)
		done <- err
	}()
	<-f.started
	bl.remove(shaB)
	if err := b.Remove(shaB); err != nil {
		t.Fatal(err)
	}
	close(f.gate)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "removed during the build") {
		t.Fatalf("build of content removed meanwhile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, shaB)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a build of removed content was put in place: %v", err)
	}
}

// TestNewSweeps: New removes an interrupted build and the files of
// content that went while the server was down.
func TestNewSweeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kernels")
	for _, d := range []string{".build-aaaaaaaaaaaa-123", shaA, shaB} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, Vmlinuz), []byte("k"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{Dir: dir, Blobs: newBlobs(shaA), Build: (&fakeBuild{}).build}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != shaA {
		t.Fatalf("after New the directory holds %v, want only %s", entries, shaA)
	}
}

func TestNewNeedsDirAndBlobs(t *testing.T) {
	for _, c := range []Config{{Blobs: newBlobs()}, {Dir: t.TempDir()}} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "Dir and Blobs are required") {
			t.Errorf("New(%+v): %v, want an error naming the required fields", c, err)
		}
	}
}
