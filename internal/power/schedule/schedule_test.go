package schedule

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/power"
)

// clock is a fake clock shared by schedulers: After hands the test each
// wait, and the test moves time and fires.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan wait
}

type wait struct {
	d    time.Duration
	fire chan time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- wait{d, ch}
	return ch
}

// call is one command a fake runner was given.
type call struct {
	action power.Action
	names  []string
	wave   power.Wave
	cause  string
}

type runner struct{ calls chan call }

func (r runner) Run(ctx context.Context, a power.Action, ts []power.Target, w power.Wave, _ func(power.Event)) []power.Result {
	c := call{action: a, wave: w, cause: power.CauseOf(ctx)}
	out := make([]power.Result, len(ts))
	for i, t := range ts {
		c.names = append(c.names, t.Machine.Name)
		out[i] = power.Result{Target: t, State: power.StateSent}
	}
	r.calls <- c
	return out
}

func store(t *testing.T) inventory.Store {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	st.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "/k"})
	for i, n := range []string{"lab1", "lab2", "office1"} {
		m := inventory.Machine{MAC: net.HardwareAddr{0x52, 0x54, 0, 0, 0, byte(i + 1)}, Name: n, Profile: "lab"}
		if n == "office1" {
			m.Profile = ""
		}
		if _, err := st.CreateMachine(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestScheduleFires: with an injected clock, lab-morning waits until
// 07:30, powers the lab on in its waves with the schedule as the cause,
// goes to the audit trail and /metrics, and waits for the next weekday.
// Two servers sharing a store run the firing once.
func TestScheduleFires(t *testing.T) {
	entries, err := FromConfig([]config.Schedule{{Name: "lab-morning", At: "CRON_TZ=UTC 30 7 * * 1-5", Action: "on", Profile: "lab", Wave: "2/5s"}})
	if err != nil {
		t.Fatal(err)
	}
	st := store(t)
	clk := &clock{now: time.Date(2026, 3, 2, 7, 29, 0, 0, time.UTC), waits: make(chan wait)} // a Monday
	r := runner{calls: make(chan call, 4)}
	reg := prometheus.NewRegistry()
	var scheds []*Scheduler
	for i, name := range []string{"srv-a", "srv-b"} {
		cfg := Config{Entries: entries, Runner: r, Store: st, Server: name, Now: clk.Now, After: clk.After, Reload: 48 * time.Hour}
		if i == 0 {
			cfg.Registerer = reg
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Add(1)
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	var fires []chan time.Time
	for range scheds {
		w := <-clk.waits
		if w.d != time.Minute {
			t.Fatalf("first wait %s, want 1m: until 07:30", w.d)
		}
		fires = append(fires, w.fire)
	}
	clk.set(time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC))
	for _, f := range fires {
		f <- clk.Now()
	}
	c := <-r.calls
	if c.action != power.On || len(c.names) != 2 || c.names[0] != "lab1" || c.names[1] != "lab2" ||
		c.wave != (power.Wave{Size: 2, Every: 5 * time.Second}) || c.cause != "schedule:lab-morning" {
		t.Fatalf("runner got %+v, want on for lab1 and lab2 in waves of 2/5s, caused by schedule:lab-morning", c)
	}
	for range scheds {
		if w := <-clk.waits; w.d != 24*time.Hour {
			t.Fatalf("next wait %s, want 24h: Tuesday 07:30", w.d)
		}
	}
	cancel()
	wg.Wait()
	select {
	case c := <-r.calls:
		t.Fatalf("the firing ran twice (second: %+v); a fleet must run it once", c)
	default:
	}

	audit, err := st.ListAudit(context.Background(), inventory.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Token != "schedule:lab-morning" || audit[0].Route != "SCHEDULE power on" ||
		audit[0].Summary != "2 machines, 0 failed" || audit[0].Target != "profile lab" {
		t.Fatalf("audit %+v, want one entry for the run", audit)
	}
	// Server a's /metrics counts the firing once: it ran it, or saw b run it.
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ran := 0.0
	for _, f := range fams {
		if f.GetName() != "bootfleet_schedule_runs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			ran += counter(m)
		}
	}
	if ran != 1 {
		t.Errorf("server a's bootfleet_schedule_runs_total adds up to %v, want 1", ran)
	}
	if sts := scheds[0].Statuses(); len(sts) != 1 || !sts[0].Next.Equal(time.Date(2026, 3, 3, 7, 30, 0, 0, time.UTC)) {
		t.Errorf("statuses %+v, want next run Tuesday 07:30", sts)
	}
}

func counter(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

// TestStoredSchedule: a schedule added through the API (in the store)
// runs once the scheduler hears of the change; one that does not parse
// is left out and the others run.
func TestStoredSchedule(t *testing.T) {
	st := store(t)
	ctx := context.Background()
	clk := &clock{now: time.Date(2026, 3, 2, 7, 29, 0, 0, time.UTC), waits: make(chan wait)}
	r := runner{calls: make(chan call, 4)}
	s, err := New(Config{Runner: r, Store: st, Now: clk.Now, After: clk.After, Reload: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	if w := <-clk.waits; w.d != 48*time.Hour {
		t.Fatalf("with no schedules the scheduler waits %s, want the reload interval", w.d)
	}
	for _, p := range []inventory.PowerSchedule{
		{Name: "broken", At: "every morning", Action: "on", All: true},
		{Name: "office", At: "CRON_TZ=UTC 30 7 * * *", Action: "cycle", Machines: []string{"office1"}},
	} {
		if err := st.PutSchedule(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	s.Changed()
	w := <-clk.waits
	if w.d != time.Minute {
		t.Fatalf("after the change the scheduler waits %s, want 1m until office's 07:30", w.d)
	}
	clk.set(time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC))
	w.fire <- clk.Now()
	c := <-r.calls
	if c.action != power.Cycle || len(c.names) != 1 || c.names[0] != "office1" || c.cause != "schedule:office" {
		t.Fatalf("runner got %+v, want cycle of office1 by schedule:office", c)
	}
	<-clk.waits
	sts := s.Statuses()
	if len(sts) != 1 || sts[0].Name != "office" || sts[0].Source != "api" {
		t.Fatalf("statuses %+v, want office only (broken left out), from the api", sts)
	}
	cancel()
	<-done
}
