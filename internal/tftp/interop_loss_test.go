package tftp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/safefs"
)

// TestHelperServer is not a test: TestInteropLoss runs the test binary with
// BF_TFTP_HELPER_ROOT set inside a network namespace, where this serves that
// directory on BF_TFTP_HELPER_ADDR until killed. A separate process is needed
// because a Go process cannot move its sockets into another namespace.
func TestHelperServer(t *testing.T) {
	root := os.Getenv("BF_TFTP_HELPER_ROOT")
	if root == "" {
		return // only runs as TestInteropLoss's child; not a skip, so CI sees no skipped test
	}
	roots, err := safefs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := NewServer(Config{FS: RootsFS(roots), Logger: log, DisableGSO: os.Getenv("BF_TFTP_HELPER_NOGSO") != ""})
	go func() {
		time.Sleep(200 * time.Millisecond)
		fmt.Println("ready")
	}()
	if err := s.ListenAndServe(ctx, os.Getenv("BF_TFTP_HELPER_ADDR")); err != nil {
		t.Fatal(err)
	}
}

// TestInteropLoss downloads with atftp at windowsize 64 while nftables drops
// 5% of all UDP packets (DATA and ACK alike) in a private network namespace.
// Packets are dropped on input, silently as on a wire: a drop on output
// fails the sender's sendto with EPERM, and atftp aborts when that happens
// to its request. Requests (to port 6969) are spared for the same reason.
//
// For measurements, BF_TFTP_LOSS_PCT changes the loss, BF_TFTP_LOSS_MB the
// file size, and BF_TFTP_HELPER_NOGSO=1 turns GSO off in the server: the
// drop rule sees a GSO datagram before it is split, so with GSO a drop
// takes out a run of up to 64 blocks rather than one.
func TestInteropLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a network namespace")
	}
	atftp := requireTool(t, "atftp")
	ipTool := requireTool(t, "ip")
	nft := requireTool(t, "nft")
	if os.Geteuid() != 0 {
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatal("TestInteropLoss needs root for network namespaces (BOOTFLEET_CI is set)")
		}
		t.Skip("needs root for network namespaces")
	}
	ns := fmt.Sprintf("bf-tftp-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	run(ipTool, "netns", "add", ns)
	t.Cleanup(func() { exec.Command(ipTool, "netns", "del", ns).Run() })
	run(ipTool, "-n", ns, "link", "set", "lo", "up")
	lossPct, lossMB := "5", 1
	if v := os.Getenv("BF_TFTP_LOSS_PCT"); v != "" {
		lossPct = v
	}
	if v, err := strconv.Atoi(os.Getenv("BF_TFTP_LOSS_MB")); err == nil && v > 0 {
		lossMB = v
	}
	rules := `table inet bfloss {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport != 6969 numgen random mod 100 < ` + lossPct + ` drop
	}
}
`
	cmd := exec.Command(ipTool, "netns", "exec", ns, nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s", err, out)
	}

	root := t.TempDir()
	data := randBytes(31, lossMB<<20)
	if err := os.WriteFile(filepath.Join(root, "img"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(ipTool, "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperServer$", "-test.count=1")
	srv.Env = append(os.Environ(), "BF_TFTP_HELPER_ROOT="+root, "BF_TFTP_HELPER_ADDR=:6969")
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("helper server not ready:\n%s", srvErr.String())
	}

	for _, opts := range [][]string{{"windowsize 64"}, {"windowsize 64", "blksize 1456"}, {"windowsize 4", "blksize 1456"}} {
		t.Run(strings.Join(opts, ","), func(t *testing.T) {
			local := filepath.Join(t.TempDir(), "out")
			args := []string{"netns", "exec", ns, atftp}
			for _, o := range opts {
				args = append(args, "--option", o)
			}
			args = append(args, "-g", "-r", "img", "-l", local, "127.0.0.1", "6969")
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			start := time.Now()
			out, err := exec.CommandContext(ctx, ipTool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("atftp %v: %v\n%s\nserver:\n%s", opts, err, out, tail(srvErr.String(), 3000))
			}
			got, _ := os.ReadFile(local)
			if !bytes.Equal(got, data) {
				t.Fatalf("download differs under loss: got %d bytes, want %d", len(got), len(data))
			}
			t.Logf("%d bytes under %s%% loss in %v", len(got), lossPct, time.Since(start).Round(time.Millisecond))
		})
	}
}
