package initramfs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/agent"
	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

// imageKernel is the newest kernel in a disk image's root file system,
// which stays mounted read-only until close.
type imageKernel struct {
	version    string
	vmlinuz    string // path on the host, under the mount
	modulesDir string // lib/modules/VERSION on the host, under the mount
	fsType     string // the root's file system: its module goes in too
	close      func() error
}

// mountOptions never write to the image: a dirty journal or log is left
// unreplayed, so the content-addressed image stays exactly what it was.
var mountOptions = map[string]string{"ext4": "ro,noload", "xfs": "ro,norecovery", "btrfs": "ro,rescue=nologreplay"}

// openImageKernel finds the root file system in a raw image the way the
// agent does and mounts it read-only through a loop device (mount(8)).
func openImageKernel(image string) (*imageKernel, error) {
	f, err := os.Open(image)
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	root, err := diskprobe.FindRoot(f, st.Size(), diskprobe.Choice{})
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", image, err)
	}
	opts, ok := mountOptions[root.FS.Type]
	if !ok {
		return nil, fmt.Errorf("%s: %s: no file system bootfleet can read a kernel from (want ext4, xfs or btrfs)", image, root.Reason)
	}
	if root.Partition != nil {
		opts += fmt.Sprintf(",offset=%d,sizelimit=%d", root.Partition.Start, root.Partition.Size)
	}
	dir, err := os.MkdirTemp("", "bootfleet-image-")
	if err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", root.FS.Type, "-o", "loop,"+opts, image, dir).CombinedOutput(); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("mount the image's root (%s, %s) read-only: %w: %s (this needs root and the %s module on this host)",
			root.Reason, root.FS.Type, err, bytes.TrimSpace(out), root.FS.Type)
	}
	k := &imageKernel{fsType: root.FS.Type, close: func() error {
		err := unix.Unmount(dir, 0)
		os.Remove(dir)
		return err
	}}
	if err := k.find(dir); err != nil {
		k.close()
		return nil, fmt.Errorf("%s (%s): %w", image, root.Reason, err)
	}
	return k, nil
}

// find picks the newest /boot/vmlinuz-VERSION that has its modules in
// /lib/modules/VERSION, resolving paths as the image's own system would.
func (k *imageKernel) find(dir string) error {
	boot, err := agent.ResolvePathInRoot(dir, "/boot")
	if err != nil {
		return fmt.Errorf("no /boot in the root file system: %w (a separate /boot partition is not read; use --kernel-deb)", err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, boot, "vmlinuz-*"))
	var versions, skipped []string
	for _, n := range names {
		v := strings.TrimPrefix(filepath.Base(n), "vmlinuz-")
		if _, err := agent.ResolvePathInRoot(dir, "/lib/modules/"+v); err != nil {
			skipped = append(skipped, v)
			continue
		}
		versions = append(versions, v)
	}
	if len(versions) == 0 {
		return fmt.Errorf("no /boot/vmlinuz-VERSION with its /lib/modules/VERSION in the image (kernels without modules: %v); install a kernel in the image (Debian: linux-image-amd64)", skipped)
	}
	sort.Slice(versions, func(i, j int) bool { return versionLess(versions[i], versions[j]) })
	k.version = versions[len(versions)-1]
	vmlinuz, err := agent.ResolveInRoot(dir, "/boot/vmlinuz-"+k.version)
	if err != nil {
		// Kernels are not executable files in every distribution.
		vmlinuz = filepath.Join(boot, "vmlinuz-"+k.version)
	}
	mods, _ := agent.ResolvePathInRoot(dir, "/lib/modules/"+k.version)
	k.vmlinuz = filepath.Join(dir, vmlinuz)
	k.modulesDir = filepath.Join(dir, mods)
	return nil
}

// versionLess compares kernel releases number by number ("6.1.0-9" before
// "6.1.0-10"), falling back to the text.
func versionLess(a, b string) bool {
	fa, fb := splitNumbers(a), splitNumbers(b)
	for i := 0; i < len(fa) && i < len(fb); i++ {
		na, ea := strconv.Atoi(fa[i])
		nb, eb := strconv.Atoi(fb[i])
		switch {
		case ea == nil && eb == nil && na != nb:
			return na < nb
		case (ea != nil || eb != nil) && fa[i] != fb[i]:
			return fa[i] < fb[i]
		}
	}
	return len(fa) < len(fb)
}

func splitNumbers(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' || r == '+' || r == '_' })
}
