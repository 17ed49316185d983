package ukicache

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/testutil"
	"github.com/bootfleet/bootfleet/internal/uki"
)

// stubFile is Debian's stub, which the tests also use as the kernel:
// Build reads only a kernel's PE machine type, and the stub is a PE for
// the same machine.
func stubFile(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(config.DefaultUKIStub); err != nil {
		testutil.SkipUnlessCI(t, config.DefaultUKIStub+" is missing (scripts/deps.sh installs systemd-boot-efi)")
	}
	return config.DefaultUKIStub
}

// testInputs is a stub, a kernel and an initrd of n bytes in dir.
func testInputs(t *testing.T, n int) (stub, dir, kernel, initrd string) {
	t.Helper()
	stub, dir = stubFile(t), t.TempDir()
	kernel, initrd = filepath.Join(dir, "kernel"), filepath.Join(dir, "initrd")
	copyFile(t, stub, kernel)
	if err := os.WriteFile(initrd, bytes.Repeat([]byte("initrd"), n/6), 0o644); err != nil {
		t.Fatal(err)
	}
	return stub, dir, kernel, initrd
}

func TestOpenBuildsOnceAndCaches(t *testing.T) {
	stub, dir, kernel, rd := testInputs(t, 6000)
	c := New(filepath.Join(dir, "uki"), stub, nil)

	want, err := c.Size(kernel, []string{rd})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	names := make([]string, 4)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := c.Open(kernel, []string{rd})
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			st, _ := f.Stat()
			if st.Size() != want {
				t.Errorf("image is %d bytes, Size said %d", st.Size(), want)
			}
			names[i] = f.Name()
		}()
	}
	wg.Wait()
	ents, _ := os.ReadDir(filepath.Join(dir, "uki"))
	if len(ents) != 1 || names[0] != names[3] {
		t.Fatalf("want one image (no temporary left) for four concurrent opens, got %v, opened %v", ents, names)
	}
	got, _ := os.ReadFile(names[0])
	var direct bytes.Buffer
	withImage(stub, kernel, []string{rd}, func(img uki.Image) error { _, err := uki.Build(&direct, img); return err })
	if !bytes.Equal(got, direct.Bytes()) {
		t.Fatalf("cached image (%d bytes) differs from uki.Build's (%d bytes)", len(got), direct.Len())
	}
	if n, _ := c.Size(kernel, []string{rd}); n != want {
		t.Fatalf("Size of the cached image = %d, want %d", n, want)
	}

	// A changed initrd names a new image; the old one stays for readers.
	os.WriteFile(rd, []byte("new initrd"), 0o644)
	os.Chtimes(rd, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	f, err := c.Open(kernel, []string{rd})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Name() == names[0] {
		t.Fatalf("changed initrd reopened the old image %s", f.Name())
	}
}

func TestErrors(t *testing.T) {
	stub := stubFile(t)
	dir := t.TempDir()
	notPE := filepath.Join(dir, "notpe")
	os.WriteFile(notPE, []byte("plain text, not a PE image"), 0o644)
	tests := []struct {
		name, stub, kernel string
		want               error
	}{
		{"no stub", filepath.Join(dir, "missing.stub"), stub, ErrNoStub},
		{"missing kernel", stub, filepath.Join(dir, "missing"), os.ErrNotExist},
		{"kernel not PE", stub, notPE, uki.ErrNotPE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(filepath.Join(dir, "uki-"+tt.name), tt.stub, nil)
			if _, err := c.Size(tt.kernel, nil); !errors.Is(err, tt.want) {
				t.Errorf("Size: got %v, want %v", err, tt.want)
			}
			if _, err := c.Open(tt.kernel, nil); !errors.Is(err, tt.want) {
				t.Errorf("Open: got %v, want %v", err, tt.want)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, "uki-"+tt.name)); len(ents) != 0 {
				t.Errorf("failed build left %v", ents)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
