package power

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Result is one machine's outcome of a command.
type Result struct {
	Target Target
	Wave   int       // 1-based
	At     time.Time // when its driver was called
	State  State     // "" when Err is set
	Err    error
}

// Event is a runner's progress report: a wave starting (Result nil) or
// one machine's result.
type Event struct {
	Wave, Waves int
	Size        int     // machines in this wave
	Result      *Result // nil when the wave starts
}

// Runner carries a command out over many machines. The zero value is not
// usable: set Drivers.
type Runner struct {
	// Drivers by inventory driver name (wol, ipmi, redfish).
	Drivers map[string]Driver
	// Timeout bounds each machine's call, so one dead BMC cannot hold up
	// its wave. Default DefaultTimeout.
	Timeout time.Duration
	// Parallel bounds the calls in flight within a wave. Default 64.
	Parallel int
	// Powered, when set, hears of each machine a command started (on,
	// cycle or reset that succeeded), with the cause in Run's context;
	// the telemetry recorder ties the boot that follows to it. It is
	// called from several goroutines at once.
	Powered func(mac net.HardwareAddr, a Action, cause string)
	Logger  *slog.Logger                         // default: discard
	Now     func() time.Time                     // default time.Now
	After   func(time.Duration) <-chan time.Time // default time.After; tests step waves with it
}

// DefaultTimeout is a machine's time to answer: an IPMI session takes
// four round trips and slow BMCs take seconds for each.
const DefaultTimeout = 20 * time.Second

func (r *Runner) defaults() {
	if r.Timeout <= 0 {
		r.Timeout = DefaultTimeout
	}
	if r.Parallel <= 0 {
		r.Parallel = 64
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.After == nil {
		r.After = time.After
	}
}

// Run does a on every target, w.Size at a time every w.Every, and returns
// one result per target in their order. Wave k starts k*w.Every after the
// first, however long the earlier ones took, so a lab's power draw follows
// the plan. A machine's failure is its result only; the rest go on. When
// ctx ends, the machines not yet started fail with ctx's error. report,
// when non-nil, is called from one goroutine at a time.
func (r *Runner) Run(ctx context.Context, a Action, ts []Target, w Wave, report func(Event)) []Result {
	r.defaults()
	if report == nil {
		report = func(Event) {}
	}
	out := make([]Result, len(ts))
	sizes := w.Split(len(ts))
	t0 := r.Now()
	var mu sync.Mutex // serialises report
	first := 0
	for k, size := range sizes {
		if k > 0 {
			wait := t0.Add(time.Duration(k) * w.Every).Sub(r.Now())
			select {
			case <-r.After(max(wait, 0)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			for i := first; i < len(ts); i++ {
				out[i] = Result{Target: ts[i], Wave: waveOf(i, sizes), Err: fmt.Errorf("not started: %w", context.Cause(ctx))}
			}
			return out
		}
		report(Event{Wave: k + 1, Waves: len(sizes), Size: size})
		sem := make(chan struct{}, r.Parallel)
		var wg sync.WaitGroup
		for i := first; i < first+size; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				res := r.one(ctx, a, ts[i], k+1)
				out[i] = res
				mu.Lock()
				report(Event{Wave: k + 1, Waves: len(sizes), Size: size, Result: &res})
				mu.Unlock()
			}()
		}
		wg.Wait()
		first += size
	}
	return out
}

func waveOf(i int, sizes []int) int {
	for k, n := range sizes {
		if i < n {
			return k + 1
		}
		i -= n
	}
	return len(sizes)
}

// one calls t's driver under the timeout. A driver that ignores its
// context is left behind: its answer is dropped when it comes.
func (r *Runner) one(ctx context.Context, a Action, t Target, wave int) Result {
	res := Result{Target: t, Wave: wave, At: r.Now()}
	if t.Settings.Driver == inventory.DriverNone {
		res.Err = fmt.Errorf("power driver none: bootfleet does not switch this machine; set its driver with bootfleet machine power")
		return res
	}
	d, ok := r.Drivers[t.Settings.Driver]
	if !ok {
		res.Err = fmt.Errorf("driver %q: not available on this server; want one of the configured drivers, or set the machine's power driver", t.Settings.Driver)
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	type answer struct {
		s   State
		err error
	}
	done := make(chan answer, 1)
	go func() {
		s, err := d.Do(cctx, t, a)
		done <- answer{s, err}
	}()
	select {
	case ans := <-done:
		res.State, res.Err = ans.s, ans.err
	case <-cctx.Done():
		res.Err = cctx.Err()
	}
	if errors.Is(res.Err, context.DeadlineExceeded) && ctx.Err() == nil {
		res.Err = fmt.Errorf("%s: no answer within %s; check that the controller is reachable: %w", t.Settings.Driver, r.Timeout, res.Err)
	}
	if res.Err != nil {
		res.State = ""
		r.Logger.Warn("power command failed", "machine", t.Machine.String(), "action", a, "driver", t.Settings.Driver, "err", res.Err)
	} else {
		if r.Powered != nil && a.Starts() {
			r.Powered(t.Machine.MAC, a, CauseOf(ctx))
		}
		r.Logger.Info("power command", "machine", t.Machine.String(), "action", a, "driver", t.Settings.Driver, "state", res.State)
	}
	return res
}
