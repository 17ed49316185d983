package initramfs

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSoftdepPre(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"pre: crypto-crc32c", []string{"crypto-crc32c"}},
		{"pre: a b post: c", []string{"a", "b"}},
		{"post: c pre: d", []string{"d"}},
		{"", nil},
	} {
		if got := softdepPre(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("softdepPre(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// kernelTree finds a Debian kernel's modules: the e2e cache's extracted
// tree (BOOTFLEET_MODULES_DIR) or the running kernel's. Without one the
// resolution test skips; it is a unit test, not a CI prerequisite.
func kernelTree(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{os.Getenv("BOOTFLEET_MODULES_DIR"), "/lib/modules/" + uname(t)} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "kernel/drivers/block/nbd.ko")); err == nil {
			return dir
		}
	}
	t.Skip("no kernel module tree with nbd.ko (set BOOTFLEET_MODULES_DIR to a lib/modules/VERSION directory)")
	return ""
}

func uname(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func TestResolveDebianKernel(t *testing.T) {
	tree, err := OpenTree(kernelTree(t))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := tree.Resolve(slices.Concat(DefaultModules, CacheModules, []string{"virtio_net", "igb", "r8169"}))
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	var names []string
	for i, m := range mods {
		pos[m.Name] = i
		names = append(names, m.Name)
	}
	t.Logf("load order: %s", strings.Join(names, " "))
	for _, pair := range [][2]string{
		{"virtio", "virtio_net"}, {"virtio_ring", "virtio_pci"}, {"jbd2", "ext4"}, {"mbcache", "ext4"},
		{"crc32c_generic", "jbd2"}, // softdep pre: crypto-crc32c, generic over crc32c_intel
		{"dm_mod", "dm_snapshot"}, {"dca", "igb"}, {"libphy", "r8169"}, {"dm_bufio", "dm_snapshot"}, {"nvme_core", "nvme"},
	} {
		before, after := pair[0], pair[1]
		pb, okb := pos[before]
		pa, oka := pos[after]
		if tree.builtin[before] || tree.builtin[after] {
			continue
		}
		if !okb || !oka || pb > pa {
			t.Errorf("want %s before %s in %v", before, after, names)
		}
	}
	for _, m := range []string{"nbd", "ext4", "virtio_net"} {
		if _, ok := pos[m]; !ok && !tree.builtin[m] {
			t.Errorf("%s missing from %v", m, names)
		}
	}
	// btrfs's softdeps name crypto algorithms that Debian builds in
	// (sha256_generic): no accelerated variant may stand in for them, since
	// it fails to load on a CPU without its instructions (QEMU TCG).
	fsMods, err := tree.Resolve([]string{"btrfs", "xfs"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fsMods {
		if tree.builtin["sha256_generic"] && strings.HasPrefix(m.Name, "sha256_") {
			t.Errorf("%s resolved for a softdep that the built-in sha256_generic satisfies", m.Name)
		}
	}
	if _, err := tree.Resolve([]string{"no_such_module"}); err == nil || !strings.Contains(err.Error(), "neither built into") {
		t.Errorf("unknown module: got %v", err)
	}
}
