package testutil

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a child the test can kill -9: it runs in its own process
// group with its output in a log file, and it dies with the test (at
// cleanup, or with the test binary through Pdeathsig).
type Process struct {
	t      testing.TB
	Cmd    *exec.Cmd
	Exited chan struct{} // closed once the process has been waited for
	Log    string
}

// StartProcess runs name with args, its stdout and stderr in the file log.
func StartProcess(t testing.TB, log, name string, args ...string) *Process {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{t: t, Cmd: cmd, Exited: make(chan struct{}), Log: log}
	go func() { cmd.Wait(); close(p.Exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.Exited
	})
	return p
}

// Kill9 sends SIGKILL to the process group and waits until the process is
// gone, so whatever starts next sees exactly what the kernel had when it died.
func (p *Process) Kill9() {
	p.t.Helper()
	if err := syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill -9 %s: %v", p.Cmd.Path, err)
	}
	select {
	case <-p.Exited:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s (log %s) still running 10 s after SIGKILL", p.Cmd.Path, p.Log)
	}
}

// LogText is the whole log so far.
func (p *Process) LogText() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// LogTail is the last n lines of the log, headed by its path.
func (p *Process) LogTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.LogText(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- " + p.Log + " (tail) ---\n" + strings.Join(lines, "\n")
}
