package safefs

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fixture builds:
//
//	base/secret                 (outside every root)
//	base/r1/hello.txt
//	base/r1/sub/inner.txt
//	base/r1/sub/dup.txt         ("from r1")
//	base/r1/good-link -> hello.txt
//	base/r1/sub-link -> sub/inner.txt
//	base/r1/escape-link -> ../secret
//	base/r1/abs-link -> /etc/passwd
//	base/r1/abs-inside-link -> base/r1/hello.txt (absolute, points inside)
//	base/r1/dotdot-link -> ..
//	base/r1/dir-link -> sub
//	base/r1/proc-link -> /proc/self/root
//	base/r1/fifo                (named pipe)
//	base/r1/dev-null            (char device 1:3, when mknod is permitted)
//	base/r2/only2.txt
//	base/r2/sub/dup.txt         ("from r2")
//	base/r2/escape-link         (decoy: must not be reached via r1's escaping link)
func fixture(t testing.TB) (base, r1, r2 string) {
	t.Helper()
	base = t.TempDir()
	r1 = filepath.Join(base, "r1")
	r2 = filepath.Join(base, "r2")
	mkdir := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(filepath.Join(r1, "sub"))
	mkdir(filepath.Join(r2, "sub"))
	write(filepath.Join(base, "secret"), "SECRET")
	write(filepath.Join(r1, "hello.txt"), "hello")
	write(filepath.Join(r1, "sub", "inner.txt"), "inner")
	write(filepath.Join(r1, "sub", "dup.txt"), "from r1")
	write(filepath.Join(r2, "only2.txt"), "only2")
	write(filepath.Join(r2, "sub", "dup.txt"), "from r2")
	write(filepath.Join(r2, "escape-link"), "r2 decoy must not be reached")
	link("hello.txt", filepath.Join(r1, "good-link"))
	link("sub/inner.txt", filepath.Join(r1, "sub-link"))
	link("../secret", filepath.Join(r1, "escape-link"))
	link("/etc/passwd", filepath.Join(r1, "abs-link"))
	link(filepath.Join(r1, "hello.txt"), filepath.Join(r1, "abs-inside-link"))
	link("..", filepath.Join(r1, "dotdot-link"))
	link("sub", filepath.Join(r1, "dir-link"))
	link("/proc/self/root", filepath.Join(r1, "proc-link"))
	if err := unix.Mkfifo(filepath.Join(r1, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Needs root; without it the name simply does not exist and is still refused.
	_ = unix.Mknod(filepath.Join(r1, "dev-null"), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
	return base, r1, r2
}

func TestOpen(t *testing.T) {
	_, r1, r2 := fixture(t)
	roots, err := New(r1, r2)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	tests := []struct {
		name    string
		want    string // file content when the open must succeed
		wantErr error
	}{
		{name: "hello.txt", want: "hello"},
		{name: "/hello.txt", want: "hello"},
		{name: "./hello.txt", want: "hello"},
		{name: "sub/inner.txt", want: "inner"},
		{name: "sub//inner.txt", want: "inner"},
		{name: "good-link", want: "hello"},
		{name: "sub-link", want: "inner"},
		{name: "dir-link/inner.txt", want: "inner"},
		{name: "only2.txt", want: "only2"},
		{name: "/only2.txt", want: "only2"},
		{name: "sub/dup.txt", want: "from r1"}, // first root wins
		{name: "missing.txt", wantErr: ErrNotFound},
		{name: "hello.txt/x", wantErr: ErrNotFound},
		{name: "/etc/passwd", wantErr: ErrNotFound}, // looked up inside the roots only
		{name: "../secret", wantErr: ErrForbidden},
		{name: "sub/../hello.txt", wantErr: ErrForbidden}, // ".." refused even when harmless
		{name: "//etc/passwd", wantErr: ErrForbidden},
		{name: "sub\\inner.txt", wantErr: ErrForbidden},
		{name: "hello.txt\x00", wantErr: ErrForbidden},
		{name: "hello\n.txt", wantErr: ErrForbidden},
		{name: "", wantErr: ErrForbidden},
		{name: "/", wantErr: ErrForbidden},
		{name: "sub", wantErr: ErrForbidden},
		{name: "sub/", wantErr: ErrForbidden},
		{name: "escape-link", wantErr: ErrForbidden}, // not r2's decoy: first root decides
		{name: "abs-link", wantErr: ErrForbidden},
		{name: "abs-inside-link", wantErr: ErrForbidden},
		{name: "dotdot-link/secret", wantErr: ErrForbidden},
		{name: "proc-link/etc/passwd", wantErr: ErrForbidden},
		{name: "fifo", wantErr: ErrForbidden},
	}
	if _, err := os.Lstat(filepath.Join(r1, "dev-null")); err == nil {
		tests = append(tests, struct {
			name    string
			want    string
			wantErr error
		}{name: "dev-null", wantErr: ErrForbidden})
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.name), func(t *testing.T) {
			f, err := roots.Open(tt.name)
			if tt.wantErr != nil {
				if f != nil {
					f.Close()
					t.Fatalf("Open(%q) opened %s, want error %v", tt.name, f.Name(), tt.wantErr)
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Open(%q) error = %v, want %v", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tt.name, err)
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("Open(%q) content %q, want %q", tt.name, b, tt.want)
			}
		})
	}
}

func TestSentinelsMatchIOFS(t *testing.T) {
	if !errors.Is(ErrNotFound, os.ErrNotExist) || !errors.Is(ErrForbidden, os.ErrPermission) {
		t.Fatal("sentinels must match fs.ErrNotExist / fs.ErrPermission so any FileSystem maps to TFTP codes alike")
	}
}

func TestNew(t *testing.T) {
	_, r1, _ := fixture(t)
	tests := []struct {
		name  string
		roots []string
	}{
		{"none", nil},
		{"missing", []string{filepath.Join(r1, "nope")}},
		{"file", []string{filepath.Join(r1, "hello.txt")}},
		{"second bad", []string{r1, filepath.Join(r1, "nope")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := New(tt.roots...); err == nil {
				r.Close()
				t.Fatalf("New(%q) succeeded, want error", tt.roots)
			}
		})
	}
}

// TestTraversalCorpus checks every name in testdata/traversal.txt is refused.
func TestTraversalCorpus(t *testing.T) {
	_, r1, r2 := fixture(t)
	roots, err := New(r1, r2)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	cases := readCorpus(t)
	if len(cases) < 30 {
		t.Fatalf("traversal corpus has %d cases, expected at least 30", len(cases))
	}
	for _, name := range cases {
		t.Run(strconv.Quote(name), func(t *testing.T) {
			f, err := roots.Open(name)
			if err == nil {
				f.Close()
				t.Fatalf("Open(%q) succeeded (%s), want refusal", name, f.Name())
			}
			if !errors.Is(err, ErrForbidden) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("Open(%q) error %v is neither ErrForbidden nor ErrNotFound", name, err)
			}
		})
	}
}

func readCorpus(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("testdata/traversal.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, decodeEscapes(t, line))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeEscapes(t testing.TB, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+3 < len(s) && s[i+1] == 'x':
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				t.Fatalf("corpus line %q: bad escape: %v", s, err)
			}
			b.WriteByte(byte(v))
			i += 3
		default:
			t.Fatalf("corpus line %q: lone backslash; write \\\\ for a literal one", s)
		}
	}
	return b.String()
}

// FuzzOpen asserts that whatever name a client sends, any file that opens
// is a regular file whose real path lies inside one of the roots.
func FuzzOpen(f *testing.F) {
	base, r1, r2 := fixture(f)
	for _, c := range readCorpus(f) {
		f.Add(c)
	}
	for _, s := range []string{"hello.txt", "/sub/inner.txt", "good-link", "dir-link/inner.txt", "only2.txt"} {
		f.Add(s)
	}
	roots, err := New(r1, r2)
	if err != nil {
		f.Fatal(err)
	}
	real1, _ := filepath.EvalSymlinks(r1)
	real2, _ := filepath.EvalSymlinks(r2)
	_ = base
	f.Fuzz(func(t *testing.T, name string) {
		file, err := roots.Open(name)
		if err != nil {
			if file != nil {
				t.Fatalf("Open(%q) returned a file and an error", name)
			}
			return
		}
		defer file.Close()
		where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(file.Fd())))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(where, real1+"/") && !strings.HasPrefix(where, real2+"/") {
			t.Fatalf("Open(%q) opened %s, outside roots %s and %s", name, where, real1, real2)
		}
		fi, err := file.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("Open(%q) opened a non-regular file: %v %v", name, fi, err)
		}
	})
}

func TestPinServesOnlyTheExactName(t *testing.T) {
	base, r1, _ := fixture(t)
	outside := filepath.Join(base, "outside-pinned.efi")
	if err := os.WriteFile(outside, []byte("PINNED"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(r1, "ipxe-link.efi")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	r, err := New(r1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Open("ipxe-link.efi"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("before pinning, an escaping symlink must be refused, got %v", err)
	}
	if err := r.Pin("ipxe-link.efi", link); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ipxe-link.efi", "/ipxe-link.efi"} {
		f, err := r.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "PINNED" {
			t.Fatalf("%s: got %q", name, b)
		}
	}
	if _, err := r.Open("../outside-pinned.efi"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("pinning must not open other names, got %v", err)
	}
	if err := r.Pin("dir", base); !errors.Is(err, ErrForbidden) {
		t.Fatalf("pinning a directory: got %v", err)
	}
}
