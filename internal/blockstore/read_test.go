package blockstore

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
)

// fakeSources offers the sources a test names, over content, and records
// which one answered.
type fakeSources struct {
	content                   []byte
	file                      *os.File
	mapped, canLoad, loads    bool // mappedSpan, loadable, loadSpan say yes
	spans, cached, failReadAt bool // fileSpan, readCached say yes; ReadAt fails
	used                      string
}

func (s *fakeSources) ReadAt(p []byte, off int64) (int, error) {
	s.used = "ReadAt"
	if s.failReadAt {
		return 0, syscall.EIO
	}
	return copy(p, s.content[off:]), nil
}

func (s *fakeSources) mappedSpan(off, n int64) ([]byte, bool) {
	if !s.mapped {
		return nil, false
	}
	s.used = "mappedSpan"
	return s.content[off : off+n], true
}

func (s *fakeSources) fileSpan(off, n int64) (*os.File, int64, bool) {
	if !s.spans {
		return nil, 0, false
	}
	s.used = "fileSpan"
	return s.file, off, true
}

func (s *fakeSources) loadable(int64, int64) bool { return s.canLoad }

func (s *fakeSources) loadSpan(off, n int64) ([]byte, bool) {
	if !s.loads {
		return nil, false
	}
	s.used = "loadSpan"
	return s.content[off : off+n], true
}

func (s *fakeSources) readCached(p []byte, off int64) bool {
	if !s.cached {
		return false
	}
	s.used = "readCached"
	copy(p, s.content[off:])
	return true
}

// TestReadChoice checks the order in which a READ's sources are tried:
// for a large READ the mapping, then a file span, then a worker if the
// mapping can load the range; for any READ then the page cache; on a
// worker the loaded mapping, then ReadAt.
func TestReadChoice(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	f := &os.File{}
	const large, small = minSpan, minSpan - 1
	for _, tc := range []struct {
		name  string
		src   fakeSources
		n     int
		files bool
		// What ReadNow answers ("" for not now), then, if not now, ReadSpan.
		now, later string
	}{
		{name: "large: the mapping first", n: large, files: true, src: fakeSources{mapped: true, spans: true, cached: true}, now: "mappedSpan"},
		{name: "large: a file span where the mapping says no", n: large, files: true, src: fakeSources{spans: true, cached: true, canLoad: true}, now: "fileSpan"},
		{name: "large: no file span the connection cannot send", n: large, src: fakeSources{spans: true, cached: true}, now: "readCached"},
		{name: "large, loadable: to a worker, which loads it", n: large, files: true, src: fakeSources{canLoad: true, loads: true, cached: true}, later: "loadSpan"},
		{name: "large, loadable, load fails: ReadAt", n: large, files: true, src: fakeSources{canLoad: true}, later: "ReadAt"},
		{name: "large, neither spanned nor loadable: the page cache", n: large, files: true, src: fakeSources{cached: true}, now: "readCached"},
		{name: "large, nothing now: ReadAt", n: large, files: true, src: fakeSources{}, later: "ReadAt"},
		{name: "small: the page cache, not the mapping", n: small, files: true, src: fakeSources{mapped: true, spans: true, canLoad: true, loads: true, cached: true}, now: "readCached"},
		{name: "small, not cached: ReadAt, not the loader", n: small, files: true, src: fakeSources{canLoad: true, loads: true}, later: "ReadAt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.src
			s.content, s.file = content, f
			const off = 4099
			p := make([]byte, tc.n)
			sp, ok := readNow(&s, p, off, tc.files)
			if ok != (tc.now != "") || s.used != tc.now {
				t.Fatalf("readNow: answered %v by %q, want %q", ok, s.used, tc.now)
			}
			if !ok {
				var err error
				if sp, err = readSpan(&s, p, off); err != nil || s.used != tc.later {
					t.Fatalf("readSpan: %v by %q, want %q", err, s.used, tc.later)
				}
			}
			switch {
			case sp.File != nil:
				if sp.File != f || sp.FileOff != off {
					t.Fatalf("file span %p at %d, want the image's file at %d", sp.File, sp.FileOff, off)
				}
			case !bytes.Equal(sp.Bytes, content[off:off+tc.n]):
				t.Fatalf("span of %d bytes differs from the content at %d", len(sp.Bytes), off)
			}
		})
	}
}

// A read error on a worker reaches the server, which answers EIO.
func TestReadSpanError(t *testing.T) {
	s := &fakeSources{content: make([]byte, 1<<20), failReadAt: true}
	if _, err := readSpan(s, make([]byte, 4096), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("readSpan with a failing ReadAt: %v, want EIO", err)
	}
}
