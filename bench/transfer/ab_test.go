package transfer

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestParseABFlags(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	plain := t.TempDir() + "/plain"
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		err  string // substring; empty: no error
	}{
		{"two builds", []string{"head=" + exe, "new=" + exe}, ""},
		{"no build", []string{"-rounds", "3"}, "want at least one NAME=BINARY"},
		{"no name", []string{"=" + exe}, "want NAME=BINARY"},
		{"name taken twice", []string{"a=" + exe, "a=" + exe}, "is taken"},
		{"name of a peer", []string{"dnsmasq=" + exe}, "is taken"},
		{"not executable", []string{"a=" + plain}, "not an executable"},
		{"a directory", []string{"a=" + t.TempDir()}, "not an executable"},
		{"missing", []string{"a=/nonexistent/bootfleet"}, "not an executable"},
		{"zero rounds", []string{"-rounds", "0", "a=" + exe}, "at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseABFlags(tc.args)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("parseABFlags(%q) = %v, want error containing %q", tc.args, err, tc.err)
			}
		})
	}
}

// TestABSummary: medians skip failed runs, each build is set against every
// other server round by round, and wakeups that were not counted are left
// out rather than compared as zero.
func TestABSummary(t *testing.T) {
	const size = 1456 * 999 // 1000 blocks, the last one empty
	run := func(sec, cpu float64) Run { return Run{Sec: sec, OK: true, ServerCPU: cpu} }
	runs := map[string][]Run{
		"head":   {run(10, 0.030), run(12, 0.030), run(11, 0.030)},
		"new":    {run(9, 0.020), {Sec: 30}, run(10, 0.020)},
		"atftpd": {run(10, 0.025), run(10, 0.025), run(10, 0.025)},
	}
	wakes := map[string][]float64{"head": {1.3, 1.3, 1.3}, "new": {1.2, math.NaN(), 1.2}, "atftpd": {0, 0, 0}}
	var w strings.Builder
	writeABSummary(&w, []string{"head", "new", "atftpd"}, 2, runs, wakes, size, 5)
	got := w.String()
	for _, want := range []string{
		"head         11.000",
		"new           9.500",
		"20.00           1.20  9.000 NaN 10.000", // CPU and wakeups per block; the failed run shown as NaN
		"atftpd       10.000",
		"25.00              –", // atftpd's wakeups were not counted
		"head     vs new      time 1.106×, slower in 2 of 2 (sign test p = 0.500); server CPU 1.500×, more in 2 of 2 (p = 0.500); wakeups 1.083×",
		"new      vs atftpd   time 0.950×, slower in 0 of 2 (sign test p = 0.500); server CPU 0.800×, more in 0 of 2 (p = 0.500)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, " vs ") != 3 {
		t.Errorf("want 3 comparisons (head-new, head-atftpd, new-atftpd):\n%s", got)
	}
}

// TestTurnaround: two threads' calls interleave in perf script's output;
// per block the server sleeps 20 µs in recvfrom, takes 2 µs to start the
// writev, which takes 3 µs, and one other thread's futex is counted.
func TestTurnaround(t *testing.T) {
	var b strings.Builder
	at := func(us float64) string { return fmt.Sprintf("%.9f:", 1+us/1e6) }
	line := func(tid int, us float64, enter bool, nr int, ret int) {
		if enter {
			fmt.Fprintf(&b, "%d %s raw_syscalls:sys_enter: NR %d (3, 7f00, 5b4, 0, 0, 0)\n", tid, at(us), nr)
		} else {
			fmt.Fprintf(&b, "%d %s  raw_syscalls:sys_exit: NR %d = %d\n", tid, at(us), nr, ret)
		}
	}
	for i := range 4 {
		t0 := float64(i) * 26
		line(100, t0, true, 20, 0)
		if i == 1 {
			line(200, t0+1, true, 202, 0) // another thread's call, split around this one's
		}
		line(100, t0+3, false, 20, 1460)
		if i == 1 {
			line(200, t0+3.5, false, 202, 0)
		}
		line(100, t0+4, true, 45, 0)
		line(100, t0+24, false, 45, 4)
	}
	line(100, 4*26, true, 20, 0)
	line(100, 4*26+3, false, 20, 1460)
	calls, err := parseSyscalls(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := turnaround(calls)
	want := "4 blocks; median µs per block: period 26.0, turnaround 2.0 (ACK wait ends → DATA send starts), DATA send call 3.0; calls per block: writev 1.00, recvfrom 1.00, futex 0.25"
	if got != want {
		t.Fatalf("turnaround:\n got %s\nwant %s", got, want)
	}
}

// TestABSection: the A/B section is replaced in place, appended when
// missing, and a report without one is left as it is.
func TestABSection(t *testing.T) {
	sec := func(body string) string { return abBegin + "\n" + body + "\n" + abEnd }
	for _, tc := range []struct {
		name, md, sec, want string
	}{
		{"appended", "# Report\n\n## Notes\n", sec("new"), "# Report\n\n## Notes\n\n" + sec("new") + "\n"},
		{"replaced in place", "# R\n" + sec("old") + "\n## After\n", sec("new"), "# R\n" + sec("new") + "\n## After\n"},
		{"nothing to keep", "# R\n", "", "# R\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := withABSection(tc.md, tc.sec); got != tc.want {
				t.Fatalf("withABSection = %q, want %q", got, tc.want)
			}
		})
	}
	if got := abSection("x" + sec("kept") + "y"); got != sec("kept") {
		t.Fatalf("abSection = %q", got)
	}
	if got := abSection("no markers " + abEnd + abBegin); got != "" {
		t.Fatalf("abSection of misordered markers = %q, want empty", got)
	}
}

func TestInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   bool
	}{
		{"dies of SIGINT", "kill -INT $$", true},
		{"exits 1", "exit 1", false},
		{"dies of SIGTERM", "kill -TERM $$", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := exec.Command("sh", "-c", tc.script).Run()
			if got := interrupted(err); got != tc.want {
				t.Fatalf("interrupted(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
