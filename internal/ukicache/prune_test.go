package ukicache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneRemovesUnusedImages: a build removes the images nobody opened
// for Unused and the temporary files of builds that died, and keeps an
// old image that was opened lately, since opening records its use.
func TestPruneRemovesUnusedImages(t *testing.T) {
	stub, dir, kernel, rd := testInputs(t, 600)
	images := filepath.Join(dir, "uki")
	now := time.Now()
	c := New(images, stub, nil)
	c.now = func() time.Time { return now }

	// An image in use: built, then aged, then opened again.
	f, err := c.Open(kernel, []string{rd})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	used := f.Name()
	age := func(name string, d time.Duration) {
		t.Helper()
		if err := os.Chtimes(name, now.Add(-d), now.Add(-d)); err != nil {
			t.Fatal(err)
		}
	}
	age(used, Unused+time.Hour)
	now = now.Add(touchEvery)
	if f, err = c.Open(kernel, []string{rd}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	put := func(name string, d time.Duration) string {
		t.Helper()
		p := filepath.Join(images, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		age(p, d)
		return p
	}
	stale := put("0123.efi", Unused+time.Hour)
	recent := put("4567.efi", Unused-time.Hour)
	deadBuild := put(".89ab.efi.tmp1", 2*touchEvery)
	liveBuild := put(".cdef.efi.tmp2", time.Minute)
	other := put("notes.txt", 2*Unused)

	// A new kernel names a new image, whose build prunes.
	os.Chtimes(kernel, now.Add(time.Minute), now.Add(time.Minute))
	if f, err = c.Open(kernel, []string{rd}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		path string
		kept bool
	}{
		{used, true}, {f.Name(), true}, {recent, true}, {liveBuild, true}, {other, true},
		{stale, false}, {deadBuild, false},
	} {
		_, err := os.Stat(tc.path)
		if kept := err == nil; kept != tc.kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(tc.path), kept, tc.kept)
		}
	}
}
