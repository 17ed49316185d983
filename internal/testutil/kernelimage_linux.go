package testutil

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NeedImageMount skips t unless this machine can build an initramfs from
// a disk image, which mounts it: root, mkfs.ext4, mount and a static
// /bin/busybox (which tests use as the agent too). Under BOOTFLEET_CI=1,
// where the tests run as root after scripts/deps.sh, it fails instead.
func NeedImageMount(t testing.TB) {
	t.Helper()
	why := ""
	for _, tool := range []string{"mkfs.ext4", "mount"} {
		if _, err := exec.LookPath(tool); err != nil && why == "" {
			why = tool + " missing (e2fsprogs, mount)"
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil && why == "" {
		why = "no static /bin/busybox (busybox-static)"
	}
	if os.Geteuid() != 0 {
		why = "not root: building from an image mounts it"
	}
	if why == "" {
		return
	}
	if os.Getenv("BOOTFLEET_CI") == "1" {
		t.Fatalf("BOOTFLEET_CI=1 but %s; run the tests as root after scripts/deps.sh", why)
	}
	t.Skip(why)
}

// KernelImage writes a raw ext4 image of a small root file system with
// /boot/vmlinuz-VERSION and /lib/modules/VERSION, and returns its path and
// the vmlinuz bytes. modules are the files of lib/modules/VERSION by
// relative path; nil declares every module the agent loads built in
// (modules.builtin), so no kernel package is needed.
func KernelImage(t testing.TB, version string, modules map[string][]byte) (string, []byte) {
	t.Helper()
	if modules == nil {
		modules = map[string][]byte{
			// The module index wants one module file; this one is never read.
			"kernel/drivers/misc/unused.ko": []byte("never read"),
			"modules.builtin": []byte(strings.Join([]string{
				"kernel/drivers/virtio/virtio_pci.ko", "kernel/drivers/net/virtio_net.ko",
				"kernel/drivers/block/nbd.ko", "kernel/fs/ext4/ext4.ko"}, "\n") + "\n"),
		}
	}
	vmlinuz := bytes.Repeat([]byte("kernel "+version+" "), 1000)
	files := map[string][]byte{
		"boot/vmlinuz-" + version: vmlinuz,
		"etc/os-release":          []byte("ID=test\n"),
		"sbin/init":               []byte("#!/bin/sh\n"),
	}
	for name, data := range modules {
		files[filepath.Join("lib/modules", version, name)] = data
	}
	tree := t.TempDir()
	for name, data := range files {
		p := filepath.Join(tree, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	image := filepath.Join(t.TempDir(), "root.ext4")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", tree, image, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	return image, vmlinuz
}
