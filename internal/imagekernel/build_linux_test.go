package imagekernel

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/initramfs"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestRealBuild builds the boot files of a real ext4 image through the
// store, with initramfs.Build mounting it, and busybox standing in for
// the static agent. The image's kernel 9.9.9-test has every module the
// agent loads built in or, when this machine has a module tree with
// nbd.ko (BOOTFLEET_MODULES_DIR or the running kernel's), real modules
// copied from it.
func TestRealBuild(t *testing.T) {
	testutil.NeedImageMount(t)
	const version = "9.9.9-test"
	for _, tt := range []struct {
		name    string
		modules func(t *testing.T) (map[string][]byte, []string) // lib/modules/VERSION files; the module files the initramfs must hold
	}{
		{"builtin modules", func(*testing.T) (map[string][]byte, []string) { return nil, nil }},
		{"real modules", realModules},
	} {
		t.Run(tt.name, func(t *testing.T) {
			modules, want := tt.modules(t)
			raw, vmlinuz := testutil.KernelImage(t, version, modules)
			data := t.TempDir()
			store, err := imagestore.Open(data)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(raw)
			if err != nil {
				t.Fatal(err)
			}
			sha, _, err := store.Import(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			log := slog.New(slog.NewTextHandler(t.Output(), nil))
			b, err := New(Config{Dir: filepath.Join(data, "kernels"), Blobs: store, Agent: "/bin/busybox", Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			b.Prepare("test-root", sha)
			if got := mustRead(t, b, sha, Vmlinuz); got != string(vmlinuz) {
				t.Fatalf("vmlinuz: %d bytes, want the image's /boot/vmlinuz-%s (%d bytes)", len(got), version, len(vmlinuz))
			}
			rd, err := b.Open(context.Background(), sha, Initrd)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			// xz, the default compression: the tool is a CI prerequisite.
			unxz := exec.Command("xz", "-dc")
			unxz.Stdin = rd
			archive, err := unxz.Output()
			if err != nil {
				t.Fatalf("initrd.img does not unpack with xz -dc: %v", err)
			}
			for _, w := range append([]string{"070701", "init\x00", "bin/busybox\x00", "kernel=" + version + "\n"}, want...) {
				if !bytes.Contains(archive, []byte(w)) {
					t.Errorf("initramfs lacks %q", w)
				}
			}
		})
	}
}

// realModules copies the modules the agent needs, and their dependencies,
// from this machine's module tree; it skips without one.
func realModules(t *testing.T) (map[string][]byte, []string) {
	src := ""
	for _, dir := range []string{os.Getenv("BOOTFLEET_MODULES_DIR"), "/lib/modules/" + osRelease()} {
		if _, err := os.Stat(filepath.Join(dir, "kernel/drivers/block/nbd.ko")); dir != "" && err == nil {
			src = dir
			break
		}
	}
	if src == "" {
		t.Skip("no kernel module tree with nbd.ko (set BOOTFLEET_MODULES_DIR to a lib/modules/VERSION directory)")
	}
	tree, err := initramfs.OpenTree(src)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := tree.Resolve(initramfs.DefaultModules)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	var want []string
	for _, m := range mods {
		rel, err := filepath.Rel(src, m.Path)
		if err != nil {
			t.Fatal(err)
		}
		if files[rel], err = os.ReadFile(m.Path); err != nil {
			t.Fatal(err)
		}
		want = append(want, "lib/modules/"+m.Name+".ko\x00")
	}
	for _, f := range []string{"modules.builtin", "modules.builtin.modinfo"} {
		if b, err := os.ReadFile(filepath.Join(src, f)); err == nil {
			files[f] = b
		}
	}
	return files, want
}

func osRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}
