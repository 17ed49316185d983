package nbd_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// needTool skips without the tool on a developer machine and fails in CI
// (BOOTFLEET_CI set), where scripts/deps.sh installs libnbd-bin and
// qemu-utils.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatalf("%s not installed (BOOTFLEET_CI is set): run scripts/deps.sh", name)
		}
		t.Skipf("%s not installed; apt-get install libnbd-bin qemu-utils", name)
	}
	return p
}

// diskExports serves one base image as "base" (mode none), "ephemeral" and
// "persistent", each client getting its own overlay, like a machine would.
type diskExports struct {
	base *blockstore.Image
	dir  string
	mu   sync.Mutex
}

func (e *diskExports) Lookup(name string, _ net.Addr) (nbd.Export, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	mode, err := blockstore.ParseMode(map[string]string{"base": "none", "ephemeral": "ephemeral", "persistent": "persistent"}[name])
	if err != nil {
		return nil, fmt.Errorf("export %q: %w", name, nbd.ErrUnknownExport)
	}
	return blockstore.Open(e.base, filepath.Join(e.dir, name), mode, blockstore.Options{BlockSize: 4096})
}

func TestInterop(t *testing.T) {
	nbdinfo, nbdcopy := needTool(t, "nbdinfo"), needTool(t, "nbdcopy")
	qemuImg, qemuIO := needTool(t, "qemu-img"), needTool(t, "qemu-io")

	dir := t.TempDir()
	img := make([]byte, 8<<20)
	copy(img, bytes.Repeat([]byte{0x5a}, 1<<20)) // qemu-io checks patterns here
	r := rand.New(rand.NewPCG(1, 2))
	for i := 1 << 20; i < len(img); i++ {
		img[i] = byte(r.Uint32())
	}
	imgPath := filepath.Join(dir, "base.img")
	if err := os.WriteFile(imgPath, img, 0o600); err != nil {
		t.Fatal(err)
	}
	base, err := blockstore.OpenImage(imgPath)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()

	logs := &testutil.SyncBuffer{}
	srv := nbd.NewServer(&diskExports{base: base, dir: dir}, nbd.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	}()
	url := "nbd://" + ln.Addr().String()

	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// qemu-io reports failed commands and pattern mismatches on stdout,
	// not always in its exit status.
	qio := func(t *testing.T, export string, cmds ...string) string {
		t.Helper()
		args := []string{"-f", "raw"}
		for _, c := range cmds {
			args = append(args, "-c", c)
		}
		out := run(t, qemuIO, append(args, url+"/"+export)...)
		if strings.Contains(out, "failed") || strings.Contains(out, "error") {
			t.Fatalf("qemu-io %v:\n%s", cmds, out)
		}
		return out
	}
	copyOut := func(t *testing.T, export string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.img")
		run(t, nbdcopy, url+"/"+export, out)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("nbdinfo list is refused", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), nbdinfo, "--list", url).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "server replied with error to list request") {
			t.Fatalf("nbdinfo --list: %v; want the server to refuse the list:\n%s", err, out)
		}
	})
	t.Run("nbdinfo read-only flags", func(t *testing.T) {
		out := run(t, nbdinfo, url+"/base")
		for _, want := range []string{"is_read_only: true", "can_multi_conn: true", "can_flush: true"} {
			if !strings.Contains(out, want) {
				t.Errorf("nbdinfo output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("nbdcopy whole export", func(t *testing.T) {
		if !bytes.Equal(copyOut(t, "base"), img) {
			t.Fatal("nbdcopy of the base export differs from the image")
		}
	})
	t.Run("qemu-img compare", func(t *testing.T) {
		out := run(t, qemuImg, "compare", "-f", "raw", "-F", "raw", imgPath, url+"/base")
		if !strings.Contains(out, "Images are identical") {
			t.Fatalf("qemu-img compare: %s", out)
		}
	})
	t.Run("qemu-io write to read-only is refused", func(t *testing.T) {
		out, _ := exec.Command(qemuIO, "-f", "raw", "-c", "write -P 0xab 0 64k", url+"/base").CombinedOutput()
		if !strings.Contains(string(out), "failed") && !strings.Contains(string(out), "read-only") && !strings.Contains(string(out), "Permission") {
			t.Fatalf("write to the read-only export was not refused:\n%s", out)
		}
	})
	t.Run("qemu-io patterns through ephemeral overlay", func(t *testing.T) {
		qio(t, "ephemeral",
			"write -P 0xab 0 64k", "read -P 0xab 0 64k",
			"write -P 0xcd 66000 1000", "read -P 0x5a 65536 464", "read -P 0xcd 66000 1000", "read -P 0x5a 67000 1000",
			"write -z 128k 64k", "read -P 0 128k 64k",
			"discard 512k 64k", "flush", "aio_write -P 0x11 768k 4k", "aio_flush", "read -P 0x11 768k 4k")
		// A new session on an ephemeral export starts from the base.
		qio(t, "ephemeral", "read -P 0x5a 0 64k")
	})
	t.Run("persistent overlay keeps writes", func(t *testing.T) {
		qio(t, "persistent", "write -P 0xab 0 64k", "write -P 0xee 2M 12345", "read -P 0xab 0 64k")
		qio(t, "persistent", "read -P 0xab 0 64k", "read -P 0xee 2M 12345")
		want := bytes.Clone(img)
		copy(want, bytes.Repeat([]byte{0xab}, 64<<10))
		copy(want[2<<20:], bytes.Repeat([]byte{0xee}, 12345))
		if !bytes.Equal(copyOut(t, "persistent"), want) {
			t.Fatal("nbdcopy of the persistent overlay differs from base + writes")
		}
		// The base is untouched.
		if !bytes.Equal(copyOut(t, "base"), img) {
			t.Fatal("writes through an overlay reached the base")
		}
	})
}
