package initramfs

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildRefusesBadInputs(t *testing.T) {
	dynamic := "/bin/sh" // dynamically linked on Debian
	for _, tc := range []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"no kernel", Options{Agent: "x"}, "exactly one of"},
		{"both kernels", Options{KernelDeb: "a", ModulesDir: "b"}, "exactly one of"},
		{"no agent", Options{ModulesDir: "b"}, "no path for the bootfleet agent"},
		{"missing agent", Options{ModulesDir: "b", Agent: "/nonexistent"}, "CGO_ENABLED=0"},
		{"dynamic agent", Options{ModulesDir: "b", Agent: dynamic}, "dynamically linked"},
		{"not elf", Options{ModulesDir: "b", Agent: "build.go"}, "not an ELF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(io.Discard, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Build: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestBuildFromTree builds a real initramfs from a kernel tree, with the
// static busybox as a stand-in agent, and lists it with GNU cpio.
func TestBuildFromTree(t *testing.T) {
	dir := kernelTree(t)
	bb := "/bin/busybox"
	if _, err := os.Stat(bb); err != nil {
		t.Skip("no static /bin/busybox (busybox-static)")
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio not installed")
	}
	var out bytes.Buffer
	res, err := Build(&out, Options{ModulesDir: dir, Busybox: bb, Agent: bb})
	if err != nil {
		t.Fatal(err)
	}
	if res.KernelVersion != filepath.Base(dir) {
		t.Errorf("KernelVersion = %q, want %q", res.KernelVersion, filepath.Base(dir))
	}
	cmd := exec.Command("cpio", "-it", "--quiet")
	cmd.Stdin = bytes.NewReader(decompress(t, res.Compression, out.Bytes()))
	list, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -it: %v\n%s", err, list)
	}
	for _, want := range []string{"init", "bin/busybox", "bin/udhcpc", "bin/switch_root", "dev/console", "etc/modules", "etc/udhcpc/script", "lib/modules/nbd.ko", "lib/modules/ext4.ko", "lib/modules/virtio_net.ko", "etc/nic-modules", "newroot"} {
		if !strings.Contains("\n"+string(list), "\n"+want+"\n") {
			t.Errorf("initramfs lacks %s; has:\n%s", want, list)
		}
	}
	var again bytes.Buffer
	if _, err := Build(&again, Options{ModulesDir: dir, Busybox: bb, Agent: bb}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), again.Bytes()) {
		t.Error("two builds from the same inputs differ; the initramfs must be reproducible")
	}
}
