package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a background process (bootfleet, QEMU, dnsmasq) whose output is
// kept as lines that tests wait on, and copied raw to an artifact file.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lineLog

	exited  chan struct{} // closed when the process has exited
	exitErr error
}

// startProc starts cmd with stdout and stderr going to logPath, and stops it
// in t.Cleanup (SIGTERM, then SIGKILL after 5 s). Cleanups run last-in
// first-out, so processes stop before their namespace is deleted.
func startProc(t testing.TB, name string, cmd *exec.Cmd, logPath string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, out: newLineLog(f), exited: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	// Its own process group, so stop also reaches anything it forked, and a
	// WaitDelay, so a child still holding the output pipe cannot hang Wait.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.exitErr = cmd.Wait()
		p.out.flush()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop ends the process group this test started (by its id); safe to call
// more than once.
func (p *proc) stop() {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.exited:
		syscall.Kill(-pgid, syscall.SIGKILL) // stragglers it forked, if any
		return
	default:
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// alive returns an error once the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v", p.name, p.exitErr)
	default:
		return nil
	}
}

// lineLog is an io.Writer that writes through to a file and keeps complete
// lines, cleaned of carriage returns and terminal escapes, for matching.
type lineLog struct {
	file *os.File

	mu      sync.Mutex
	partial []byte
	lines   []string
	times   []time.Time   // when each of lines arrived
	changed chan struct{} // closed and replaced on every new line
}

// maxLines bounds memory if firmware loops printing; a boot prints a few hundred.
const maxLines = 20000

var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[a-zA-Z]|[()][0-9A-Za-z]|[=>c])`)

func newLineLog(f *os.File) *lineLog {
	return &lineLog{file: f, changed: make(chan struct{})}
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.file.Write(b)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.addLocked(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	return len(b), nil
}

func (l *lineLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.addLocked(string(l.partial))
		l.partial = nil
	}
}

func (l *lineLog) addLocked(s string) {
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r", "")
	if len(l.lines) < maxLines {
		l.lines = append(l.lines, s)
		l.times = append(l.times, time.Now())
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// snapshot returns lines from index from on, and a channel closed when more arrive.
func (l *lineLog) snapshot(from int) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from > len(l.lines) {
		from = len(l.lines)
	}
	return append([]string(nil), l.lines[from:]...), l.changed
}

// snapshotAll returns every kept line and when each arrived.
func (l *lineLog) snapshotAll() ([]string, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...), append([]time.Time(nil), l.times...)
}

// firstMatch returns the first line containing every one of subs and when
// it arrived; ok is false if none has.
func (l *lineLog) firstMatch(subs ...string) (line string, at time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.lines {
		if anyLine([]string{s}, subs...) {
			return s, l.times[i], true
		}
	}
	return "", time.Time{}, false
}

// tail returns the last n lines, for failure messages.
func (l *lineLog) tail(n int) string {
	all, _ := l.snapshot(0)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// waitLine returns the first line, from the start of the log, for which
// match returns true. It fails when match returns an error (the line proved
// the boot failed, so waiting on is pointless), when ctx ends, or when the
// process has exited and no line matched.
func (p *proc) waitLine(ctx context.Context, match func(string) (bool, error)) (string, error) {
	next := 0
	for {
		lines, changed := p.out.snapshot(next)
		for _, line := range lines {
			ok, err := match(line)
			if err != nil {
				return line, err
			}
			if ok {
				return line, nil
			}
		}
		next += len(lines)
		select {
		case <-changed:
		case <-p.exited:
			// The output may end after Wait returned; look once more.
			if rest, _ := p.out.snapshot(next); len(rest) > 0 {
				continue
			}
			return "", fmt.Errorf("%s exited (%v) before the expected line", p.name, p.exitErr)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
