package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mergedUsrRoot lays out a root like Debian 12's: /sbin -> usr/sbin,
// /lib -> usr/lib, /usr/sbin/init -> /lib/systemd/systemd (absolute).
func mergedUsrRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/sbin", "usr/lib/systemd", "usr/bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "usr/lib/systemd/systemd"), []byte("#!elf"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/plain"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc/notadir"), []byte("x"), 0o755))
	must(os.Symlink("usr/sbin", filepath.Join(root, "sbin")))
	must(os.Symlink("usr/lib", filepath.Join(root, "lib")))
	must(os.Symlink("usr/bin", filepath.Join(root, "bin")))
	must(os.Symlink("/lib/systemd/systemd", filepath.Join(root, "usr/sbin/init")))
	must(os.Symlink("../lib/systemd/systemd", filepath.Join(root, "usr/sbin/relinit")))
	must(os.Symlink("../../../../../../lib/systemd/systemd", filepath.Join(root, "usr/sbin/deepinit")))
	must(os.Symlink("loop2", filepath.Join(root, "usr/sbin/loop1")))
	must(os.Symlink("/sbin/loop1", filepath.Join(root, "usr/sbin/loop2")))
	must(os.Symlink("/nowhere/init", filepath.Join(root, "usr/sbin/dangling")))
	must(os.Symlink("/lib/systemd", filepath.Join(root, "usr/sbin/dirinit")))
	// An absolute link that would escape to the host if followed outside root.
	must(os.Symlink("/etc/passwd", filepath.Join(root, "usr/sbin/hostfile")))
	return root
}

func TestResolveInRoot(t *testing.T) {
	root := mergedUsrRoot(t)
	for _, c := range []struct {
		name, path, want, errHas string
	}{
		{"merged-usr /sbin/init, absolute symlink", "/sbin/init", "/usr/lib/systemd/systemd", ""},
		{"relative symlink", "/sbin/relinit", "/usr/lib/systemd/systemd", ""},
		{"dot-dots stop at the root", "/sbin/deepinit", "/usr/lib/systemd/systemd", ""},
		{"direct path through a directory symlink", "/lib/systemd/systemd", "/usr/lib/systemd/systemd", ""},
		{"redundant slashes and dots", "//sbin/./init", "/usr/lib/systemd/systemd", ""},
		{"symlink loop", "/sbin/loop1", "", "a loop"},
		{"dangling symlink names the link", "/sbin/dangling", "", "/usr/sbin/dangling -> /nowhere/init"},
		{"missing", "/sbin/nothing", "", "/usr/sbin/nothing: "},
		{"a directory", "/sbin/dirinit", "", "is a directory"},
		{"not executable", "/bin/plain", "", "not executable"},
		{"file used as a directory", "/etc/notadir/init", "", "not a directory"},
		{"absolute links stay inside the root", "/sbin/hostfile", "", "/etc/passwd: "},
		{"relative init", "sbin/init", "", "absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveInRoot(root, c.path)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("ResolveInRoot(%q) = %q, %v; want an error containing %q", c.path, got, err, c.errHas)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ResolveInRoot(%q) = %q, %v; want %q", c.path, got, err, c.want)
			}
		})
	}
}
