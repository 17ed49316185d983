package harness

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a server process started in a namespace, in its own process group
// so that Stop reaches what it forks (tftp-hpa's children, nginx's workers).
type Proc struct {
	Name string
	Argv []string // the whole command line, ip netns exec included
	Log  string   // the file holding its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{}
	cg   *Cgroup
}

// Start runs argv in namespace ns (the current one when ns is empty) with
// its output in logPath; env adds variables. The process is moved into a
// cgroup named name at once, before it can fork per-transfer children.
func Start(name, ns, logPath string, env []string, argv ...string) (*Proc, error) {
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, ShellJoin(argv), err)
	}
	p := &Proc{Name: name, Argv: argv, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	p.cg = NewCgroup(name, cmd.Process.Pid)
	return p, nil
}

// Pid is the process's PID (ip netns exec execs the server in place).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited says whether the process has exited, and how.
func (p *Proc) Exited() (string, bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.String(), true
	default:
		return "", false
	}
}

// Adopt moves processes the server forked before it was moved into its
// cgroup: call it once the server answers.
func (p *Proc) Adopt() { p.cg.Adopt(p.Pid()) }

// CPU is the CPU seconds used so far by the process and all it forked. A
// cgroup sees children whose time never reaches their parent's cutime
// (tftp-hpa ignores SIGCHLD); without one, the living tree from /proc.
func (p *Proc) CPU() float64 {
	if c, ok := p.cg.CPU(); ok {
		return c
	}
	return TreeCPU(p.Pid())
}

// PeakRSS is the largest resident set the process and its living
// descendants each reached (VmHWM), summed, in bytes.
func (p *Proc) PeakRSS() int64 {
	var total int64
	for _, pid := range append([]int{p.Pid()}, Descendants(p.Pid())...) {
		total += peakRSS(pid)
	}
	return total
}

// LogTail is the end of the process's log on one line, for errors.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	return Tail(string(b), n)
}

// Stop sends SIGTERM to the process group, then SIGKILL after 5 s, and
// removes the cgroup.
func (p *Proc) Stop() {
	pgid := p.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that outlived their parent are still in the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.cg.Remove()
}

// WaitReady calls ready every 100 ms until it returns nil, the process
// exits, or timeout passes; the error quotes the log's end.
func (p *Proc) WaitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start: %s (log %s: %s)", p.Name, p.cmd.ProcessState, p.Log, p.LogTail(400))
		case <-time.After(100 * time.Millisecond):
		}
		err := ready()
		if err == nil {
			p.Adopt()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v: %w (log %s: %s)", p.Name, timeout, err, p.Log, p.LogTail(400))
		}
	}
}
