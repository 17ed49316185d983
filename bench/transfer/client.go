package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// file is a file the servers serve, with what a correct download hashes to.
type file struct {
	Name string
	Size int64
	Sum  [32]byte
}

// step is one download: a client command writing into fifo, and the file
// it must produce.
type step struct {
	argv []string
	fifo string
	want file
}

func atftpArgv(ns, server, name, out string, blksize, window int) []string {
	a := []string{"ip", "netns", "exec", ns, "atftp", "--get", "-r", name, "-l", out,
		"--option", "blksize " + strconv.Itoa(blksize)}
	// Lockstep sends no windowsize option at all, as most firmware does.
	if window > 1 {
		a = append(a, "--option", "windowsize "+strconv.Itoa(window))
	}
	return append(a, server)
}

func curlArgv(ns, url, out string) []string {
	return []string{"ip", "netns", "exec", ns, "curl", "-sS", "--fail", "-o", out, url}
}

// tailBuffer keeps the last bytes written: atftp prints a line per
// out-of-order block under loss, which must not pile up in memory.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-1024:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return harness.Tail(string(t.buf), 300)
}

type fetchResult struct {
	cpu      float64
	err      error
	timedOut bool
}

// fetch runs one step. The client writes into a FIFO that bench reads and
// hashes, so 200 clients × 41 MiB need no disk or tmpfs space. A client
// that never opens its output (server error) is unblocked by opening the
// FIFO for writing ourselves, which reads as an empty, wrong file.
func fetch(ctx context.Context, s step) fetchResult {
	_ = os.Remove(s.fifo)
	if err := syscall.Mkfifo(s.fifo, 0o600); err != nil {
		return fetchResult{err: fmt.Errorf("mkfifo %s: %w", s.fifo, err)}
	}
	defer os.Remove(s.fifo)
	type hashed struct {
		n   int64
		sum [32]byte
		err error
	}
	got := make(chan hashed, 1)
	go func() {
		f, err := os.Open(s.fifo) // blocks until the client opens it for writing
		if err != nil {
			got <- hashed{err: err}
			return
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.CopyBuffer(h, f, make([]byte, 256<<10))
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		got <- hashed{n: n, sum: sum, err: err}
	}()

	cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	var r fetchResult
	if cmd.ProcessState != nil {
		r.cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	var h hashed
	select {
	case h = <-got:
	case <-time.After(100 * time.Millisecond):
		if w, err := os.OpenFile(s.fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case h = <-got:
		case <-time.After(10 * time.Second):
			h.err = errors.New("reading the FIFO did not finish 10 s after the client exited")
		}
	}
	switch {
	case ctx.Err() != nil:
		r.timedOut = true
		r.err = fmt.Errorf("%s: not finished at the deadline (%d of %d bytes)", s.want.Name, h.n, s.want.Size)
	case h.err != nil:
		r.err = fmt.Errorf("%s: read download: %w", s.want.Name, h.err)
	case h.n != s.want.Size || h.sum != s.want.Sum:
		r.err = fmt.Errorf("%s: got %d bytes sha256 %x…, want %d bytes sha256 %x… (client: %v %s)",
			s.want.Name, h.n, h.sum[:4], s.want.Size, s.want.Sum[:4], runErr, out.String())
	}
	return r
}

// clientsResult is what runClients saw.
type clientsResult struct {
	wall      float64
	perClient []float64
	failed    int
	timedOut  int
	cpu       float64
	firstErr  string
}

// runClients starts n clients at once; client i runs steps(i) in order. All
// of them are killed at the deadline.
func runClients(ctx context.Context, n int, steps func(i int) []step, deadline time.Duration) clientsResult {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var (
		mu  sync.Mutex
		res = clientsResult{perClient: make([]float64, n)}
		wg  sync.WaitGroup
	)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			for _, s := range steps(i) {
				r := fetch(ctx, s)
				mu.Lock()
				res.cpu += r.cpu
				if r.err != nil {
					if r.timedOut {
						res.timedOut++
					} else {
						res.failed++
					}
					if res.firstErr == "" {
						res.firstErr = r.err.Error()
					}
				}
				mu.Unlock()
				if r.err != nil {
					break
				}
			}
			res.perClient[i] = time.Since(t0).Seconds()
		}()
	}
	wg.Wait()
	res.wall = time.Since(start).Seconds()
	return res
}

var oackRe = regexp.MustCompile(`received OACK <([^>]*)>`)

// parseOACK reads the options from atftp's --trace output, e.g.
// "received OACK <blksize: 1456, windowsize: 16, >".
func parseOACK(trace string) (map[string]int, string, error) {
	m := oackRe.FindStringSubmatch(trace)
	if m == nil {
		return nil, "", errNoOACK
	}
	// atftp erases the last ", " with backspaces when printing to a terminal.
	raw := strings.Map(func(r rune) rune {
		if r < ' ' {
			return -1
		}
		return r
	}, m[1])
	opts := map[string]int{}
	for _, kv := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, raw, fmt.Errorf("OACK option %q: want a number, got %q", k, v)
		}
		opts[strings.ToLower(strings.TrimSpace(k))] = n
	}
	return opts, strings.TrimRight(strings.TrimSpace(raw), ", "), nil
}

// probe asks s for the probe file with the given options and records what
// its OACK granted: whether a server honours windowsize, and how it treats
// a blksize beyond the MTU, is part of the result.
func (b *bench) probe(ctx context.Context, s *server, blksize, window int) (Probe, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	argv := atftpArgv(s.topo.ClientNS, s.topo.ServerIP, b.probeFile.Name, "/dev/null", blksize, window)
	argv = append(argv[:5], append([]string{"--trace"}, argv[5:]...)...)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	p := Probe{Server: s.spec.name, Blksize: blksize, Windowsize: window}
	opts, raw, perr := parseOACK(string(out))
	if perr != nil {
		if err == nil && bytes.Contains(out, []byte("received DATA")) {
			p.OACK = "(none: options ignored)"
			return p, nil
		}
		return p, fmt.Errorf("probe %s: %v %w: %s", harness.ShellJoin(argv), err, perr, harness.Tail(string(out), 200))
	}
	p.OACK, p.GotBlksize, p.GotWindow = raw, opts["blksize"], opts["windowsize"]
	return p, nil
}

func (b *bench) httpProbe(ctx context.Context, s *server) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s:8080%s", s.topo.ServerIP, s.spec.urlPath(b.probeFile.Name))
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", s.topo.ClientNS, "curl", "-sS", "--fail", "-o", "/dev/null", url).CombinedOutput()
	if err != nil {
		return fmt.Errorf("GET %s: %w: %s", url, err, harness.Tail(string(out), 200))
	}
	return nil
}
