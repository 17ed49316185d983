package power

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// fakeDriver records which machines it was called for, and fails or
// hangs for the ones told to.
type fakeDriver struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]bool
	hang  map[string]bool
}

func (d *fakeDriver) Do(ctx context.Context, t Target, a Action) (State, error) {
	d.mu.Lock()
	d.calls = append(d.calls, t.Machine.Name)
	d.mu.Unlock()
	if d.hang[t.Machine.Name] {
		select {} // ignores its context: the runner must not wait for it
	}
	if d.fail[t.Machine.Name] {
		return "", errors.New("bmc said no")
	}
	return StateOn, nil
}

func targets(n int, driver string) []Target {
	ts := make([]Target, n)
	for i := range ts {
		ts[i] = Target{Machine: inventory.Machine{MAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, byte(i)}, Name: fmt.Sprintf("pc%d", i)},
			Settings: inventory.PowerSettings{Driver: driver}}
	}
	return ts
}

// fakeClock steps time only when the runner waits, so waves run at once
// and the test sees exactly which waits the runner asked for.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func TestRunWaves(t *testing.T) {
	d := &fakeDriver{fail: map[string]bool{"pc2": true}}
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	var (
		mu      sync.Mutex
		powered []string
	)
	r := &Runner{Drivers: map[string]Driver{"ipmi": d}, Now: clk.Now, After: clk.After,
		Powered: func(mac net.HardwareAddr, a Action, cause string) {
			mu.Lock()
			powered = append(powered, fmt.Sprint(mac[5], a, cause))
			mu.Unlock()
		}}
	var events []Event
	res := r.Run(WithCause(context.Background(), "api:lab"), On, targets(6, "ipmi"), Wave{Size: 2, Every: 5 * time.Second}, func(e Event) { events = append(events, e) })

	if want := []time.Duration{5 * time.Second, 5 * time.Second}; fmt.Sprint(clk.waits) != fmt.Sprint(want) {
		t.Errorf("runner waited %v, want %v between three waves", clk.waits, want)
	}
	for i, r := range res {
		if want := i/2 + 1; r.Wave != want {
			t.Errorf("pc%d ran in wave %d, want %d", i, r.Wave, want)
		}
		if i == 2 {
			if r.Err == nil || r.State != "" {
				t.Errorf("pc2: %q, %v; want its driver's error", r.State, r.Err)
			}
			continue
		}
		if r.Err != nil || r.State != StateOn {
			t.Errorf("pc%d: %q, %v; want on: one machine's failure must not stop the rest", i, r.State, r.Err)
		}
	}
	// Every machine that came on is told to telemetry, with the cause;
	// pc2, which failed, is not.
	slices.Sort(powered)
	if want := "[0onapi:lab 1onapi:lab 3onapi:lab 4onapi:lab 5onapi:lab]"; fmt.Sprint(powered) != want {
		t.Errorf("Powered heard %v, want %s", powered, want)
	}
	// Each wave's start comes before its results, and every result of a
	// wave before the next wave starts.
	var got []string
	for _, e := range events {
		if e.Result == nil {
			got = append(got, fmt.Sprintf("wave%d/%d", e.Wave, e.Waves))
		} else {
			got = append(got, fmt.Sprintf("w%d", e.Wave))
		}
	}
	if want := "wave1/3 w1 w1 wave2/3 w2 w2 wave3/3 w3 w3"; strings.Join(got, " ") != want {
		t.Errorf("events %v, want %s", got, want)
	}
}

func TestRunAllAtOnce(t *testing.T) {
	d := &fakeDriver{}
	clk := &fakeClock{}
	r := &Runner{Drivers: map[string]Driver{"ipmi": d}, Now: clk.Now, After: clk.After}
	res := r.Run(context.Background(), Status, targets(5, "ipmi"), Wave{}, nil)
	if len(clk.waits) != 0 || len(d.calls) != 5 {
		t.Fatalf("without a wave: %d waits, %d calls; want 0 and 5", len(clk.waits), len(d.calls))
	}
	for _, r := range res {
		if r.Wave != 1 {
			t.Fatalf("%s in wave %d, want 1", r.Target.Machine.Name, r.Wave)
		}
	}
}

func TestRunTimeoutAndUnknownDriver(t *testing.T) {
	d := &fakeDriver{hang: map[string]bool{"pc0": true}}
	r := &Runner{Drivers: map[string]Driver{"ipmi": d}, Timeout: 50 * time.Millisecond}
	ts := targets(3, "ipmi")
	ts[2].Settings.Driver = "redfish"
	res := r.Run(context.Background(), Off, ts, Wave{}, nil)
	if !errors.Is(res[0].Err, context.DeadlineExceeded) || !strings.Contains(res[0].Err.Error(), "no answer within 50ms") {
		t.Errorf("hanging driver: %v; want a timeout that names the limit", res[0].Err)
	}
	if res[1].Err != nil {
		t.Errorf("pc1: %v, want success beside a hanging machine", res[1].Err)
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), `driver "redfish"`) {
		t.Errorf("unknown driver: %v; want an error naming it", res[2].Err)
	}
}

func TestRunCancelledBetweenWaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := &fakeDriver{}
	r := &Runner{Drivers: map[string]Driver{"ipmi": d}, After: func(time.Duration) <-chan time.Time {
		cancel() // the admin pressed ^C while waiting for wave 2
		return make(chan time.Time)
	}}
	res := r.Run(ctx, On, targets(4, "ipmi"), Wave{Size: 2, Every: time.Minute}, nil)
	if len(d.calls) != 2 || res[0].Err != nil || !errors.Is(res[3].Err, context.Canceled) || res[3].Wave != 2 {
		t.Fatalf("calls %v, results %+v; want wave 1 done and wave 2 not started, with the cancel as its error", d.calls, res)
	}
}

func TestParseWave(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Wave
		bad  bool
	}{
		{"", Wave{}, false},
		{"20/10s", Wave{20, 10 * time.Second}, false},
		{"2/5s", Wave{2, 5 * time.Second}, false},
		{"0/5s", Wave{}, true},
		{"20", Wave{}, true},
		{"20/", Wave{}, true},
		{"20/2h", Wave{}, true},
		{"x/1s", Wave{}, true},
	} {
		got, err := ParseWave(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseWave(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.bad)
		}
	}
	if got := (Wave{Size: 2}).Split(5); fmt.Sprint(got) != "[2 2 1]" {
		t.Errorf("Split(5) by 2 = %v, want [2 2 1]", got)
	}
}
