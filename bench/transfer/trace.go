package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// With -trace, the A/B mode ends with one more transfer per server whose
// system calls perf records (raw_syscalls enter and exit of every thread
// of the server), to show where the microseconds of a lockstep block go.
// Tracing costs about a microsecond per system call, so these transfers
// are slower than the timed ones and are not counted in them.

// traceRun records the server's system calls during one lockstep transfer
// and prints the per-block breakdown.
func (b *bench) traceRun(ctx context.Context, s *server, steps func(int) []step, w io.Writer) error {
	data := filepath.Join(b.work, s.spec.name+".perf")
	rec := exec.CommandContext(ctx, "perf", "record", "-q", "-o", data,
		"-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit", "-p", strconv.Itoa(s.Pid()))
	var stderr strings.Builder
	rec.Stderr = &stderr
	if err := rec.Start(); err != nil {
		return fmt.Errorf("perf record: %w", err)
	}
	time.Sleep(time.Second) // perf attaches to every thread before it counts
	cr := runClients(ctx, 1, steps, 2*time.Minute)
	_ = rec.Process.Signal(os.Interrupt)
	// perf writes its data on SIGINT, then dies of it.
	if err := rec.Wait(); err != nil && !interrupted(err) {
		return fmt.Errorf("perf record: %w: %s", err, harness.Tail(stderr.String(), 300))
	}
	if cr.failed+cr.timedOut > 0 {
		return fmt.Errorf("traced transfer failed: %s", cr.firstErr)
	}
	script := exec.CommandContext(ctx, "perf", "script", "--ns", "-i", data, "-F", "tid,time,event,trace")
	out, err := script.StdoutPipe()
	if err != nil {
		return err
	}
	if err := script.Start(); err != nil {
		return fmt.Errorf("perf script: %w", err)
	}
	calls, err := parseSyscalls(out)
	if werr := script.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("perf script: %w", werr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-10s %s (traced transfer: %.2f s)\n", s.spec.name, turnaround(calls), cr.wall)
	return nil
}

// interrupted says whether err is a process's death by SIGINT.
func interrupted(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// tracedCall is one completed system call of a server thread.
type tracedCall struct {
	enter, exit float64 // seconds
	nr          int
	ret         int64
}

// parseSyscalls pairs each thread's sys_enter and sys_exit lines of perf
// script output ("TID TIME: raw_syscalls:sys_enter: NR n (args)", "... =
// ret") into calls, sorted by entry.
func parseSyscalls(r io.Reader) ([]tracedCall, error) {
	type open struct {
		t  float64
		nr int
	}
	pending := map[string]open{}
	var calls []tracedCall
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[3] != "NR" {
			continue
		}
		t, err := strconv.ParseFloat(strings.TrimSuffix(f[1], ":"), 64)
		if err != nil {
			return nil, fmt.Errorf("perf script line %q: time: %w", sc.Text(), err)
		}
		nr, err := strconv.Atoi(f[4])
		if err != nil {
			return nil, fmt.Errorf("perf script line %q: syscall number: %w", sc.Text(), err)
		}
		switch f[2] {
		case "raw_syscalls:sys_enter:":
			pending[f[0]] = open{t, nr}
		case "raw_syscalls:sys_exit:":
			if o, ok := pending[f[0]]; ok && o.nr == nr {
				ret, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
				calls = append(calls, tracedCall{o.t, t, nr, ret})
				delete(pending, f[0])
			}
		}
	}
	slices.SortFunc(calls, func(a, b tracedCall) int {
		switch {
		case a.enter < b.enter:
			return -1
		case a.enter > b.enter:
			return 1
		}
		return 0
	})
	return calls, sc.Err()
}

// x86-64 system call numbers of the calls that send DATA.
var sendCalls = map[int]string{1: "write", 20: "writev", 44: "sendto", 46: "sendmsg", 307: "sendmmsg"}

// syscallNames names the calls the servers make per block in the summary.
var syscallNames = map[int]string{0: "read", 1: "write", 7: "poll", 8: "lseek", 17: "pread64", 20: "writev", 23: "select",
	35: "nanosleep", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 202: "futex", 232: "epoll_wait",
	270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 307: "sendmmsg", 24: "sched_yield"}

// turnaround summarises a lockstep transfer's calls per block (the time
// between two DATA sends): the turnaround is from the end of the last call
// that slept (over 5 µs: the wait for the ACK, on whichever thread) to the
// start of the next DATA send; then the send itself; the rest of the period
// is the network, the client and the server's own way back to sleep.
func turnaround(calls []tracedCall) string {
	isData := func(c tracedCall) bool {
		_, ok := sendCalls[c.nr]
		return ok && (c.ret > 1000 || c.nr == 307 && c.ret >= 1) // sendmmsg returns messages, not bytes
	}
	var sends, sleeps []tracedCall
	for _, c := range calls {
		switch {
		case isData(c):
			sends = append(sends, c)
		case c.exit-c.enter > 5e-6:
			sleeps = append(sleeps, c)
		}
	}
	if len(sends) < 2 {
		return "no DATA sends traced"
	}
	slices.SortFunc(sleeps, func(a, b tracedCall) int {
		if a.exit < b.exit {
			return -1
		}
		return 1
	})
	var period, turn, send []float64
	j := 0
	for i := 1; i < len(sends); i++ {
		prev, cur := sends[i-1], sends[i]
		for j+1 < len(sleeps) && sleeps[j+1].exit <= cur.enter {
			j++
		}
		if j < len(sleeps) && sleeps[j].exit >= prev.exit && sleeps[j].exit <= cur.enter {
			turn = append(turn, cur.enter-sleeps[j].exit)
		}
		period = append(period, cur.enter-prev.enter)
		send = append(send, cur.exit-cur.enter)
	}
	counts := map[int]int{}
	first, last := sends[0].enter, sends[len(sends)-1].enter
	for _, c := range calls {
		if c.enter >= first && c.enter < last {
			counts[c.nr]++
		}
	}
	nrs := make([]int, 0, len(counts))
	for nr := range counts {
		nrs = append(nrs, nr)
	}
	slices.SortFunc(nrs, func(a, b int) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return a - b
	})
	var per []string
	blocks := float64(len(period))
	for _, nr := range nrs {
		if v := float64(counts[nr]) / blocks; v >= 0.01 {
			name := syscallNames[nr]
			if name == "" {
				name = "#" + strconv.Itoa(nr)
			}
			per = append(per, fmt.Sprintf("%s %.2f", name, v))
		}
	}
	us := func(xs []float64) float64 { return harness.Median(xs) * 1e6 }
	return fmt.Sprintf("%d blocks; median µs per block: period %.1f, turnaround %.1f (ACK wait ends → DATA send starts), DATA send call %.1f; calls per block: %s",
		len(period), us(period), us(turn), us(send), strings.Join(per, ", "))
}
