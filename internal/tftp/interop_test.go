package tftp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/safefs"
)

// requireTool returns the path of a client tool. A missing tool skips the
// test on a developer machine and fails it in CI (BOOTFLEET_CI set), where
// scripts/deps.sh must have installed it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatalf("%s not installed (BOOTFLEET_CI is set): run scripts/deps.sh", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// interopFiles writes the served files: a small one, one that ends exactly
// on a block boundary, and one of more than 65535 blocks of 512 bytes, so
// block numbers roll over.
func interopFiles(t *testing.T, dir string) map[string][]byte {
	files := map[string][]byte{
		"small.bin":    randBytes(21, 100_000),
		"boundary.bin": randBytes(22, 512*1456), // multiple of 512 and of 1456
		"big.bin":      randBytes(23, 65536*512+1000),
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	files["sub/nested.bin"] = randBytes(24, 5000)
	for name, d := range files {
		if err := os.WriteFile(filepath.Join(dir, name), d, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func TestInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("interop downloads 33 MB several times")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	files := interopFiles(t, root)
	roots, err := safefs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	addr, rec, logs := startServer(t, Config{FS: NewCache(RootsFS(roots), 256<<20)})
	host, port := "127.0.0.1", strconv.Itoa(addr.(*net.UDPAddr).Port)

	type clientCmd func(tool, remote, local string) []string
	tftpHPA := func(tool, remote, local string) []string {
		return []string{tool, "-m", "octet", host, port, "-c", "get", remote, local}
	}
	atftp := func(opts ...string) clientCmd {
		return func(tool, remote, local string) []string {
			args := []string{tool}
			for _, o := range opts {
				args = append(args, "--option", o)
			}
			return append(args, "-g", "-r", remote, "-l", local, host, port)
		}
	}
	curl := func(opts ...string) clientCmd {
		return func(tool, remote, local string) []string {
			args := append([]string{tool, "-sS", "--fail", "-o", local}, opts...)
			return append(args, "tftp://"+host+":"+port+"/"+remote)
		}
	}
	busybox := func(opts ...string) clientCmd {
		return func(tool, remote, local string) []string {
			args := append([]string{tool, "tftp", "-g", "-r", remote, "-l", local}, opts...)
			return append(args, host, port)
		}
	}
	tests := []struct {
		name    string
		tool    string
		cmd     clientCmd
		files   []string
		wantBlk int // negotiated values checked through OnTransfer
		wantWin int
	}{
		{"tftp-hpa", "tftp", tftpHPA, []string{"small.bin", "sub/nested.bin", "big.bin"}, 512, 1},
		{"atftp", "atftp", atftp(), []string{"small.bin", "big.bin"}, 512, 1},
		{"atftp windowsize 16 blksize 1456", "atftp", atftp("windowsize 16", "blksize 1456"), []string{"small.bin", "boundary.bin", "big.bin"}, 1456, 16},
		{"atftp windowsize 64", "atftp", atftp("windowsize 64"), []string{"small.bin", "boundary.bin", "big.bin"}, 512, 64},
		{"atftp windowsize 16 blksize 512", "atftp", atftp("windowsize 16", "blksize 512"), []string{"big.bin"}, 512, 16},
		{"curl", "curl", curl(), []string{"small.bin", "big.bin"}, 512, 1},
		{"curl blksize 1468", "curl", curl("--tftp-blksize", "1468"), []string{"small.bin", "boundary.bin"}, 1468, 1},
		{"busybox", "busybox", busybox(), []string{"small.bin", "big.bin"}, 512, 1},
		{"busybox blksize 1428", "busybox", busybox("-b", "1428"), []string{"small.bin", "boundary.bin"}, 1428, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := requireTool(t, tt.tool)
			for _, name := range tt.files {
				local := filepath.Join(t.TempDir(), "out")
				args := tt.cmd(tool, name, local)
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				start := time.Now()
				out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("%q: %v\n%s\nserver log:\n%s", args, err, out, tail(logs.String(), 2000))
				}
				got, err := os.ReadFile(local)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, files[name]) {
					t.Fatalf("%q: %s differs: got %d bytes, want %d", args, name, len(got), len(files[name]))
				}
				st := rec.next(t)
				if st.Err != nil || st.BlockSize != tt.wantBlk || st.WindowSize != tt.wantWin {
					t.Fatalf("%s: server saw %+v, want blksize %d windowsize %d", name, st, tt.wantBlk, tt.wantWin)
				}
				t.Logf("%s: %d bytes in %v (retransmits %d)", name, len(got), time.Since(start).Round(time.Millisecond), st.Retransmits)
			}
		})
	}
}

// TestInteropRefusal: real clients see the error and the server logs it.
func TestInteropRefusal(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), []byte("SECRET"), 0o644)
	root := filepath.Join(dir, "root")
	os.Mkdir(root, 0o755)
	roots, err := safefs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	addr, rec, _ := startServer(t, Config{FS: RootsFS(roots)})
	port := strconv.Itoa(addr.(*net.UDPAddr).Port)
	tool := requireTool(t, "curl")
	out, err := exec.Command(tool, "-sS", "--fail", "-o", filepath.Join(dir, "out"),
		fmt.Sprintf("tftp://127.0.0.1:%s/..%%2fsecret", port)).CombinedOutput()
	if err == nil {
		t.Fatalf("curl fetched ../secret: %s", out)
	}
	if st := rec.next(t); st.Err == nil {
		t.Fatal("refusal not reported")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); bytes.Contains(b, []byte("SECRET")) {
		t.Fatal("secret leaked")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
