package nbd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

const (
	namespace = "bf-nbdbench"
	// nsEnv marks the run inside the namespace, and names it.
	nsEnv = "BF_NBDBENCH_NS"

	imgBytes   = 512 << 20 // the read and write cases' image, on tmpfs
	smallBytes = 128 << 20 // the concurrent readers' image, on the disk
	readersMax = 50
)

// allCases are the -cases words, in the order they run.
var allCases = []string{"reads", "writes", "diskwrites", "diskrereads", "readers"}

// readerCounts are the concurrent-readers case's client counts.
var readerCounts = []int{1, 10, readersMax}

type options struct {
	rounds       int
	readerRounds int
	shortRepeat  int
	runtime      int // seconds per fio run, after a 1 s ramp
	cases        []string
	out          string
	bootfleet    string
}

func (o options) has(c string) bool { return slices.Contains(o.cases, c) }

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("nbd", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 9, "rounds of every case but readers: the fio runs are client-bound and swing by 30% between runs, and a sign test over 5 rounds cannot call any edge")
	fs.IntVar(&o.runtime, "runtime", 4, "seconds per fio run, after a 1 s ramp")
	fs.IntVar(&o.readerRounds, "reader-rounds", 9, "rounds of the concurrent-readers case (its runs are short and their cold reads swing the most)")
	fs.IntVar(&o.shortRepeat, "short-repeat", 3, "repetitions per round of the runs that last well under a second (sequential read, one reader), each in a new server order")
	cases := fs.String("cases", strings.Join(allCases, ","), "cases to run, comma-separated; the others show as failed in the report")
	fs.StringVar(&o.out, "out", "BENCHMARKS-nbd.md", "report to write")
	fs.StringVar(&o.bootfleet, "bootfleet", "bin/bootfleet", "bootfleet binary")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (the A/B mode is `nbd ab NAME=BINARY ...`)", fs.Arg(0))
	}
	if o.rounds < 1 || o.readerRounds < 1 || o.shortRepeat < 1 || o.runtime < 1 {
		return o, errors.New("-rounds, -reader-rounds, -short-repeat and -runtime must be at least 1")
	}
	for _, c := range strings.Split(*cases, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(allCases, c) {
			return o, fmt.Errorf("-cases: unknown case %q, want some of %s", c, strings.Join(allCases, ","))
		}
		o.cases = append(o.cases, c)
	}
	return o, nil
}

// Main runs the bench (flags in args; `ab ...` for the A/B mode) and
// writes its report.
func Main(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) > 0 && args[0] == "ab" {
		return abMain(ctx, log, args[1:])
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if os.Getenv(nsEnv) == "" {
		if err := checkTools(ctx, o.bootfleet); err != nil {
			return err
		}
		return reexec(ctx, namespace, append([]string{"nbd"}, args...))
	}
	return run(ctx, log, o)
}

// reexec runs this command again inside a fresh loopback namespace ns and
// deletes the namespace after it. cmd/bench registers this package as
// "nbd", which args start with.
func reexec(ctx context.Context, ns string, args []string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespace); run it with sudo")
	}
	lock, err := harness.Lock("/run/" + ns + ".lock")
	if err != nil {
		return err
	}
	defer lock.Close()
	n, err := harness.NewLoopback(ctx, ns)
	if err != nil {
		return err
	}
	defer n.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, exe}, args...)...)
	cmd.Env = append(os.Environ(), nsEnv+"="+ns)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// On a cancel the inner run gets SIGTERM and time to stop its servers
	// and delete its files (1.2 GB on /dev/shm and /var/tmp).
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the run in namespace %s: %w", ns, err)
	}
	return nil
}

// checkTools fails early, naming what to install, rather than an hour in.
func checkTools(ctx context.Context, bootfleet string) error {
	for _, t := range []string{"ip", "fio", "nbdcopy", "nbdinfo", "nbdkit", "qemu-nbd", "nbd-server", "dd", "sync", "df", bootfleet} {
		if _, err := exec.LookPath(t); err != nil {
			if t == bootfleet {
				return fmt.Errorf("%s missing: run make build (make bench does): %w", t, err)
			}
			return fmt.Errorf("%s missing: run scripts/bench-deps.sh (make bench does): %w", t, err)
		}
	}
	out, _ := exec.CommandContext(ctx, "fio", "--enghelp").CombinedOutput()
	if !slices.Contains(strings.Fields(string(out)), "nbd") {
		return errors.New("this fio has no nbd engine (fio --enghelp); the bench needs one built with libnbd")
	}
	return nil
}

// absBinary resolves a binary given as a path, so that it still names the
// same file from the servers' working directories.
func absBinary(path string) string {
	if !strings.Contains(path, "/") {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
