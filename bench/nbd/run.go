package nbd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// sample is one run of one server (or ceiling) in one case.
type sample struct {
	Case, Key string
	// Round is "r", or "r.i" for repetition i of a short run in round r:
	// the round-by-round comparison pairs runs with the same label.
	Round     string
	Value     float64 // MB/s or IOPS; NaN when the run failed
	ServerCPU float64 // seconds the server spent over the run
	ClientCPU float64 // seconds the client processes spent
	DiskMiB   float64 // readers: MiB the disk read during the run
}

// results is what the runs recorded.
type results struct {
	samples []sample
	cmds    map[string]string // "case/key": the command its runs used
	errors  []string          // one entry per failed run: what failed, then why
}

// run builds the test bed, measures every case asked for and writes the
// report.
func run(ctx context.Context, log *slog.Logger, o options) error {
	host := harness.DescribeHost(ctx) // before the report rewrites a tracked file and dirties the tree
	b := &bed{o: o, log: log, srvCmds: map[string]string{}, res: results{cmds: map[string]string{}}}
	defer b.close()
	if err := b.setup(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.measure(ctx); err != nil {
		return err
	}
	rep := b.report(ctx, host, time.Since(t0))
	for _, f := range []string{"bf.log", "bf2.log"} {
		if l, err := os.ReadFile(filepath.Join(b.work, f)); err == nil && len(l) > 0 {
			lines := strings.SplitAfter(string(l), "\n")
			fmt.Fprintf(os.Stderr, "== bootfleet logged (warn and above) in %s:\n%s", f, strings.Join(lines[:min(20, len(lines))], ""))
		}
	}
	md := render(rep)
	if old, err := os.ReadFile(o.out); err == nil {
		md = harness.WithSection(md, layersBegin, layersEnd, harness.Section(string(old), layersBegin, layersEnd)) // the layered A/B's figures survive a full run
	}
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		return err
	}
	log.Info("nbd bench written", "report", o.out, "errors", len(b.res.errors))
	return nil
}

func with(keys []string, more ...string) []string { return append(slices.Clone(keys), more...) }

// measure runs the cases in order. Reads go first, with bootfleet's
// persistent overlay still empty (reads fall through to the base); then
// writes, after which the persistent export is read again, now from the
// filled overlay; then the disk cases and the readers.
func (b *bed) measure(ctx context.Context) error {
	o, t0 := b.o, time.Now()
	done := func(what string, r, of int) error {
		b.log.Info("nbd bench: "+what, "round", r, "of", of, "elapsed", time.Since(t0).Round(time.Second))
		return ctx.Err()
	}
	rounds := func(what string, n int, round func(r int)) error {
		for r := 1; r <= n; r++ {
			round(r)
			if err := done(what, r, n); err != nil {
				return err
			}
		}
		return nil
	}
	label := func(r, i int) string { return fmt.Sprintf("%d.%d", r, i) }
	var phases []func() error
	if o.has("reads") {
		phases = append(phases, func() error {
			return rounds("reads", o.rounds, func(r int) {
				// A run lasting a fraction of a second is repeated within
				// its round, so one slow moment of the machine counts once
				// among many.
				for i := 1; i <= o.shortRepeat; i++ {
					for _, k := range harness.Rotate(with(readerKeys, "ceil", "ceil2"), r*o.shortRepeat+i) {
						b.run(ctx, "seq", k, label(r, i))
					}
				}
				for _, k := range harness.Rotate(with(readerKeys, "ceil"), r) {
					b.run(ctx, "rr", k, strconv.Itoa(r))
				}
			})
		})
	}
	if o.has("writes") {
		phases = append(phases, func() error {
			return rounds("writes", o.rounds, func(r int) {
				for _, k := range harness.Rotate(with(writerKeys, "ceil"), r) {
					b.run(ctx, "rw", k, strconv.Itoa(r))
				}
				b.run(ctx, "rr-ovl", "bf-pers", strconv.Itoa(r))
			})
		})
	}
	if o.has("diskwrites") {
		phases = append(phases, func() error {
			return rounds("disk writes", o.rounds, func(r int) {
				for _, k := range harness.Rotate(with(dwriterKeys, "ceil"), r) {
					// No run pays for the write-back of the one before it.
					unix.Sync()
					b.run(ctx, "rwd", k, strconv.Itoa(r))
				}
			})
		})
	}
	if o.has("diskrereads") {
		phases = append(phases, func() error { return b.diskRereads(ctx, rounds) })
	}
	if o.has("readers") {
		phases = append(phases, func() error {
			return rounds("concurrent readers", o.readerRounds, func(r int) {
				for _, n := range readerCounts {
					b.warmup(ctx)
					reps := 1
					if n == 1 {
						reps = o.shortRepeat
					}
					for i := 1; i <= reps; i++ {
						for _, k := range harness.Rotate(with(smallKeys, "ceil-sm"), r*reps+i) {
							b.readers(ctx, k, n, label(r, i))
						}
					}
				}
			})
		})
	}
	for _, p := range phases {
		if err := p(); err != nil {
			return err
		}
	}
	return nil
}

// diskRereads runs the disk writes right after the server read its whole
// export (untimed) from a cold page cache: the folios that reading leaves
// in the page cache are the ones the writes then land in.
func (b *bed) diskRereads(ctx context.Context, rounds func(string, int, func(int)) error) error {
	if !b.o.has("diskwrites") {
		// bootfleet's overlay is filled first when no case before did.
		if _, err := harness.Output(ctx, "nbdcopy", b.dimg, b.servers["bf-disk"].uri); err != nil {
			return fmt.Errorf("fill bf-disk's overlay: %w", err)
		}
	}
	return rounds("writes after a read", b.o.rounds, func(r int) {
		for _, k := range harness.Rotate(dwriterKeys, r) {
			unix.Sync()
			for _, f := range b.filesOf(k) {
				b.drop(ctx, f)
			}
			if _, err := harness.Output(ctx, "nbdcopy", b.servers[k].uri, "null:"); err != nil {
				b.log.Warn("the read before the writes failed", "server", names[k], "err", err)
			}
			b.servers[k].settle()
			b.run(ctx, "rwd-read", k, strconv.Itoa(r))
		}
	})
}

// filesOf lists the files a server reads and writes in the disk cases:
// bootfleet's overlay of the persistent machine and its stored image, or
// the peers' copy of the image.
func (b *bed) filesOf(key string) []string {
	if key != "bf-disk" {
		return []string{b.dimg}
	}
	data := filepath.Join(b.disk, "data")
	ovl, _ := findFiles(filepath.Join(data, "overlays"), -1, "52-54-00-bf-00-03")
	img, _ := findFiles(filepath.Join(data, "images"), imgBytes, "")
	return append(ovl, img...)
}

// command is the client command of one case and key.
func (b *bed) command(c, k string) []string {
	rt := fmt.Sprintf("--runtime=%d", b.o.runtime)
	nbdFio := []string{"fio", "--ioengine=nbd", "--bs=4k", "--iodepth=32", "--numjobs=1", "--ramp_time=1", rt, "--time_based", "--output-format=terse"}
	localFio := func(file string) []string {
		return []string{"fio", "--ioengine=psync", "--bs=4k", "--numjobs=1", "--ramp_time=1", rt, "--time_based", "--output-format=terse", "--filename=" + file}
	}
	read, write := []string{"--name=rr", "--rw=randread"}, []string{"--name=rw", "--rw=randwrite"}
	switch {
	case c == "seq" && k == "ceil":
		return []string{"dd", "if=" + b.img, "of=/dev/null", "bs=1M"}
	case c == "seq" && k == "ceil2":
		return []string{"nbdcopy", b.img, "null:"}
	case c == "seq":
		return []string{"nbdcopy", b.servers[k].uri, "null:"}
	case k == "ceil" && strings.HasPrefix(c, "rr"):
		return append(localFio(b.img), read...)
	case k == "ceil" && c == "rw":
		return append(localFio(b.img), write...)
	case k == "ceil":
		return append(localFio(b.dimg), write...)
	case strings.HasPrefix(c, "rr"):
		return append(nbdFio, "--name=rr", "--uri="+b.servers[k].uri, "--rw=randread")
	}
	return append(nbdFio, "--name=rw", "--uri="+b.servers[k].uri, "--rw=randwrite")
}

// run times one client run of case c against key and records it.
func (b *bed) run(ctx context.Context, c, k, round string) {
	argv := b.command(c, k)
	cmdline := strings.Join(argv, " ")
	b.res.cmds[c+"/"+k] = cmdline
	srv := b.servers[k]
	var c0, c1 float64
	if srv != nil {
		c0 = srv.cpu()
	}
	var stdout bytes.Buffer
	t0 := time.Now()
	cpu, err := client(ctx, argv, &stdout)
	took := time.Since(t0)
	v := math.NaN()
	if err == nil {
		if c == "seq" {
			v = imgBytes / took.Seconds() / 1e6
		} else {
			var r fioResult
			if r, err = parseTerse(stdout.String()); err == nil {
				v, err = r.iops(strings.HasPrefix(c, "rw"))
			}
		}
	}
	if err != nil {
		v = math.NaN()
		b.fail(fmt.Sprintf("%s %s failed (round %s): %s", c, names[k], round, cmdline), err)
	}
	if srv != nil {
		srv.settle()
		c1 = srv.cpu()
	}
	b.res.samples = append(b.res.samples, sample{Case: c, Key: k, Round: round, Value: v, ServerCPU: c1 - c0, ClientCPU: cpu})
}

// readers: n clients read the whole small image at once, one connection
// each, from a cold page cache; the ceiling (ceil-sm) is n local readers
// of the file without NBD.
func (b *bed) readers(ctx context.Context, k string, n int, round string) {
	c := fmt.Sprintf("readers%d", n)
	b.drop(ctx, b.small)
	srv := b.servers[k]
	var c0, c1 float64
	s0, _ := b.sectors()
	if srv != nil {
		c0 = srv.cpu()
	}
	t0 := time.Now()
	var cmds []*exec.Cmd
	var errs []error
	for i := range n {
		argv := []string{"nbdcopy", "--connections=1", "", "null:"}
		switch k {
		case "ceil-sm":
			argv = []string{"dd", "if=" + b.small, "of=/dev/null", "bs=256k", "status=none"}
		case "bf-sm":
			argv[2] = b.bfReaders[i]
		default:
			argv[2] = srv.uri
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stderr = &tailWriter{}
		if err := cmd.Start(); err != nil {
			errs = append(errs, err)
			continue
		}
		cmds = append(cmds, cmd)
	}
	var cpu float64
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, cmd.Stderr.(*tailWriter)))
		}
		cpu += processCPU(cmd.ProcessState)
	}
	took := time.Since(t0)
	if srv != nil {
		srv.settle()
		c1 = srv.cpu()
	}
	s1, _ := b.sectors()
	switch k {
	case "ceil-sm":
		b.res.cmds["readers/"+k] = fmt.Sprintf("%d x dd if=%s of=/dev/null bs=256k (at once)", n, b.small)
	case "bf-sm":
		b.res.cmds["readers/"+k] = fmt.Sprintf("%d x nbdcopy --connections=1 nbd://127.0.0.1:10819/<machine i's export> null: (at once)", n)
	default:
		b.res.cmds["readers/"+k] = fmt.Sprintf("%d x nbdcopy --connections=1 %s null: (at once)", n, srv.uri)
	}
	if len(errs) > 0 {
		b.fail(fmt.Sprintf("%s %s failed (round %s): %d of %d readers", c, names[k], round, len(errs), n), errors.Join(errs...))
		b.res.samples = append(b.res.samples, sample{Case: c, Key: k, Round: round, Value: math.NaN()})
		return
	}
	b.res.samples = append(b.res.samples, sample{Case: c, Key: k, Round: round,
		Value: float64(n) * smallBytes / took.Seconds() / 1e6, ServerCPU: c1 - c0, ClientCPU: cpu,
		DiskMiB: float64(s1-s0) * 512 / (1 << 20)})
}

// fail records a failed run for the report's Errors section.
func (b *bed) fail(what string, err error) {
	b.log.Warn(what, "err", err)
	b.res.errors = append(b.res.errors, what+"\n  "+harness.Tail(err.Error(), 300))
}

// warmup is an untimed cold read of the readers' file before each reader
// count: in an ad hoc run the first cold read after a burst of 50 readers
// got about 0.7 of the speed of the one after it, whichever server came
// first; this VM does not show why.
func (b *bed) warmup(ctx context.Context) {
	b.drop(ctx, b.small)
	if err := harness.Sh(ctx, "dd", "if="+b.small, "of=/dev/null", "bs=256k", "status=none"); err != nil {
		b.log.Warn("warm-up read failed", "err", err)
	}
}

// drop takes a file's pages out of the page cache: its next read is cold.
// The report names these two commands.
func (b *bed) drop(ctx context.Context, file string) {
	err := harness.Sh(ctx, "sync", file)
	if err == nil {
		err = harness.Sh(ctx, "dd", "if="+file, "iflag=nocache", "count=0", "status=none")
	}
	if err != nil {
		b.log.Warn("page cache drop failed", "file", file, "err", err)
	}
}

// sectors is what the disk under b.disk has read since boot, in sectors:
// the whole machine's, so other work adds a little.
func (b *bed) sectors() (int64, error) {
	st, err := os.ReadFile("/sys/class/block/" + b.dev + "/stat")
	if err != nil {
		return 0, err
	}
	return sectorsRead(string(st))
}

// client runs one client to its end and returns its CPU seconds, the
// children it reaped included (fio's job process).
func client(ctx context.Context, argv []string, stdout io.Writer) (float64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout = stdout
	stderr := &tailWriter{}
	cmd.Stderr = stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr)
	}
	return processCPU(cmd.ProcessState), err
}

func processCPU(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// tailWriter keeps the last 4 KiB written: enough of a client's stderr to
// say why it failed.
type tailWriter struct{ b []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return harness.Tail(string(t.b), 300) }
