package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Fixed names, so the commands in the report are exact. A lock keeps two
// benches apart; a run killed halfway leaves namespaces that the next run
// deletes first.
const (
	nsServer   = "bf-dhcpb-srv"
	nsClient   = "bf-dhcpb-cli"
	vethServer = "dhcpb-srv"
	vethClient = "dhcpb-cli"
	serverAddr = "10.216.0.1"
	clientAddr = "10.216.0.2"
	prefixLen  = 16
	// The pool: 65024 addresses, far more than any run hands out, so no
	// server ever runs out and every run starts from an empty store anyway.
	poolFirst = "10.216.1.0"
	poolLast  = "10.216.254.255"
	lockFile  = "/run/bootfleet-dhcpbench.lock"
)

// topologyCommands builds the two namespaces and the veth pair; they are
// printed in the report as they ran.
func topologyCommands() [][]string {
	return [][]string{
		{"ip", "netns", "add", nsServer},
		{"ip", "netns", "add", nsClient},
		{"ip", "link", "add", vethServer, "netns", nsServer, "type", "veth", "peer", "name", vethClient, "netns", nsClient},
		{"ip", "-n", nsServer, "addr", "add", fmt.Sprintf("%s/%d", serverAddr, prefixLen), "dev", vethServer},
		{"ip", "-n", nsClient, "addr", "add", fmt.Sprintf("%s/%d", clientAddr, prefixLen), "dev", vethClient},
		{"ip", "-n", nsServer, "link", "set", "lo", "up"},
		{"ip", "-n", nsClient, "link", "set", "lo", "up"},
		{"ip", "-n", nsServer, "link", "set", vethServer, "up"},
		{"ip", "-n", nsClient, "link", "set", vethClient, "up"},
	}
}

// lock takes the bench lock; the returned file holds it until closed.
func lock() (*os.File, error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w (run as root)", lockFile, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another dhcpbench holds %s; wait for it to finish", lockFile)
	}
	return f, nil
}

func buildTopology(ctx context.Context) error {
	teardown()
	for _, c := range topologyCommands() {
		if err := sh(ctx, c[0], c[1:]...); err != nil {
			teardown()
			return fmt.Errorf("build namespaces: %w", err)
		}
	}
	return nil
}

// teardown deletes both namespaces and with them the veth pair. Errors are
// ignored: it also runs when nothing is there.
func teardown() {
	for _, ns := range []string{nsServer, nsClient} {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// sh runs a short command and returns its output in the error.
func sh(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()+out.String()))
	}
	return out.String(), nil
}

// proc is a server process in the server namespace.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// startIn runs argv in ns with its output in logPath. env adds variables.
func startIn(ns, logPath string, env []string, argv ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop asks politely, then kills after 5 s.
func (p *proc) stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// waitUDP67 waits until something in the server namespace listens on UDP
// port 67: every server here opens it only once its lease store is loaded.
func (p *proc) waitUDP67(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			b, _ := os.ReadFile(p.log)
			return fmt.Errorf("exited before listening on UDP 67:\n%s", tail(b, 20))
		default:
		}
		out, _ := output(ctx, "ip", "netns", "exec", nsServer, "ss", "-Hlun", "sport", "=", ":67")
		if strings.TrimSpace(out) != "" {
			time.Sleep(300 * time.Millisecond) // let it settle past startup logging
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log)
	return fmt.Errorf("not listening on UDP 67 after %v:\n%s", timeout, tail(b, 20))
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
