package agent

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// TestIdentityReadOnlyRoot: on a read-only root (overlay none) the
// identity is mounted over the image's files, which must exist; a
// missing /etc/hostname only warns, a missing file of files: stops the
// install. It runs in a mount namespace of its own on a locked thread, so
// nothing it mounts is seen outside.
func TestIdentityReadOnlyRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatal("TestIdentityReadOnlyRoot needs root to mount (BOOTFLEET_CI is set)")
		}
		t.Skip("needs root to mount a read-only root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread, with its namespace, ends with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make mounts private: %v", err)
			return
		}
		readOnlyRoot(t)
	}()
	<-done
}

func readOnlyRoot(t *testing.T) {
	root, run := t.TempDir(), t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "mode=0755"); err != nil {
		t.Errorf("mount tmpfs: %v", err)
		return
	}
	defer unix.Unmount(root, unix.MNT_DETACH)
	for p, c := range map[string]string{
		"etc/machine-id":               "",
		"etc/passwd":                   "root:x:0:0::/root:/bin/sh\n",
		"etc/ssh/ssh_host_ed25519_key": "image key\n",
		"etc/motd":                     "image motd\n",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(c), 0o644)
	}
	os.WriteFile(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key.pub"), []byte("image pub\n"), 0o644)
	if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Errorf("remount read-only: %v", err)
		return
	}
	var warned []string
	w := identityWriter{root: root, runDir: run,
		bind:  func(src, dst string) error { return unix.Mount(src, dst, "", unix.MS_BIND, "") },
		chown: func(p string, uid, gid int) error { return os.Lchown(p, uid, gid) },
		warn:  func(msg string, _ ...any) { warned = append(warned, msg) }}
	id := identity.Identity{HostName: "pc1", MachineID: "0123456789abcdef0123456789abcdef",
		HostKeys: []identity.HostKey{{Type: identity.KeyEd25519, Private: testPrivate, Public: "ssh-ed25519 AAAAC3"}},
		Files:    []identity.File{{Path: "/etc/motd", Mode: 0o644, Content: []byte("pc1's motd\n")}}}
	if err := w.install(id); err != nil {
		t.Errorf("install on a read-only root: %v", err)
		return
	}
	for p, want := range map[string]string{
		"etc/machine-id":                   "0123456789abcdef0123456789abcdef\n",
		"etc/ssh/ssh_host_ed25519_key":     testPrivate,
		"etc/ssh/ssh_host_ed25519_key.pub": "ssh-ed25519 AAAAC3\n",
		"etc/motd":                         "pc1's motd\n",
	} {
		if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != want {
			t.Errorf("%s through the mount = %q, %v; want %q", p, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key %v, %v; want mode 0600", fi, err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "/etc/hostname") {
		t.Errorf("warnings %q, want one for the missing /etc/hostname", warned)
	}
	err := w.install(identity.Identity{Files: []identity.File{{Path: "/etc/issue", Content: []byte("x")}}})
	if err == nil || !strings.Contains(err.Error(), "add an empty /etc/issue to the image") {
		t.Errorf("a file the read-only root lacks: %v, want the install stopped saying what to add", err)
	}
	// A read-only root without even /etc (a minimal test image) boots
	// with the kernel's host name and a transient machine-id.
	bare := t.TempDir()
	if err := unix.Mount("tmpfs", bare, "tmpfs", unix.MS_RDONLY, "mode=0755"); err != nil {
		t.Errorf("mount tmpfs: %v", err)
		return
	}
	defer unix.Unmount(bare, unix.MNT_DETACH)
	w.root, warned = bare, nil
	if err := w.install(identity.Identity{HostName: "pc1", MachineID: id.MachineID}); err != nil || len(warned) != 2 {
		t.Errorf("read-only root without /etc: %v, warnings %q; want two warnings and no error", err, warned)
	}
}
