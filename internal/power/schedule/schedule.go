package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
)

// Entry is one schedule, parsed.
type Entry struct {
	Name   string
	At     string // the cron expression, as written
	spec   cron.Schedule
	Action power.Action
	Select power.Selection
	Wave   power.Wave
}

// FromConfig parses the config's schedules. Config validation has checked
// them; an error here means it was skipped.
func FromConfig(cs []config.Schedule) ([]Entry, error) {
	var out []Entry
	for i, c := range cs {
		spec, err := cron.ParseStandard(c.At)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d].at: %w", i, err)
		}
		a, err := power.ParseAction(c.Action)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d].action: %w", i, err)
		}
		w, err := power.ParseWave(c.Wave)
		if err != nil {
			return nil, fmt.Errorf("schedules[%d].wave: %w", i, err)
		}
		out = append(out, Entry{Name: c.Name, At: c.At, spec: spec, Action: a, Wave: w,
			Select: power.Selection{Machines: c.Machines, Profile: c.Profile, All: c.All}})
	}
	return out, nil
}

// Runner carries a command out (a *power.Runner).
type Runner interface {
	Run(ctx context.Context, a power.Action, ts []power.Target, w power.Wave, report func(power.Event)) []power.Result
}

// Store is what the scheduler reads and writes in the inventory.
type Store interface {
	power.Inventory
	inventory.ScheduleRuns
	AddAudit(ctx context.Context, e inventory.AuditEntry) error
}

// Config wires a Scheduler.
type Config struct {
	Entries []Entry
	Runner  Runner // required
	Store   Store  // required
	// Server names this server in claims; any name outside a fleet.
	Server string
	// Registerer gets the schedule metrics (the /metrics registry); nil
	// keeps them unregistered.
	Registerer prometheus.Registerer
	Logger     *slog.Logger                         // default: discard
	Now        func() time.Time                     // default time.Now
	After      func(time.Duration) <-chan time.Time // default time.After; tests fire schedules with it
}

// Scheduler fires the entries; Run until ctx ends.
type Scheduler struct {
	cfg  Config
	runs *prometheus.CounterVec
	mach *prometheus.CounterVec

	mu   sync.Mutex
	last map[string]Status
	next map[string]time.Time
}

// Status is a schedule as GET /schedules shows it.
type Status struct {
	Name, At, Action, Machines, Wave string
	Next                             time.Time
	LastRun                          time.Time // zero: not yet run by this server
	LastResult                       string    // e.g. "6 machines, 0 failed"
}

// New returns a Scheduler, its metrics registered.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Runner == nil || cfg.Store == nil {
		return nil, errors.New("schedule: a runner and a store are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	s := &Scheduler{cfg: cfg, last: map[string]Status{}, next: map[string]time.Time{},
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_schedule_runs_total",
			Help: "Firings of power schedules, by schedule and result: ok, failed (some machine failed), error (none ran), elsewhere (another server of the fleet ran it)."},
			[]string{"schedule", "result"}),
		mach: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_schedule_machines_total",
			Help: "Machines power schedules acted on, by schedule and result (ok, failed)."}, []string{"schedule", "result"}),
	}
	now := cfg.Now()
	for _, e := range cfg.Entries {
		s.next[e.Name] = e.spec.Next(now)
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.runs, s.mach} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("schedule: register metrics: %w", err)
			}
		}
	}
	return s, nil
}

// Run fires each entry at its times until ctx ends, and returns nil then
// once the runs in flight have ended. A clock that jumps (a suspended
// host) fires a missed entry once, not once per missed time.
func (s *Scheduler) Run(ctx context.Context) error {
	if len(s.cfg.Entries) == 0 {
		<-ctx.Done()
		return nil
	}
	now := s.cfg.Now()
	s.mu.Lock()
	for _, e := range s.cfg.Entries {
		s.next[e.Name] = e.spec.Next(now)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		due := s.soonest()
		select {
		case <-s.cfg.After(max(due.Sub(s.cfg.Now()), 0)):
		case <-ctx.Done():
			return nil
		}
		now := s.cfg.Now()
		for _, e := range s.cfg.Entries {
			s.mu.Lock()
			at := s.next[e.Name]
			fire := !at.After(now)
			if fire {
				s.next[e.Name] = e.spec.Next(now)
			}
			s.mu.Unlock()
			if fire {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.fire(ctx, e, at)
				}()
			}
		}
	}
}

func (s *Scheduler) soonest() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Time
	for _, n := range s.next {
		if t.IsZero() || n.Before(t) {
			t = n
		}
	}
	return t
}

// fire runs e's firing due at at, if this server claims it.
func (s *Scheduler) fire(ctx context.Context, e Entry, at time.Time) {
	log := s.cfg.Logger.With("schedule", e.Name, "action", e.Action, "due", at)
	won, err := s.cfg.Store.ClaimScheduleRun(ctx, e.Name, at, s.cfg.Server)
	if err != nil {
		log.Error("schedule not run: claiming its firing in the inventory failed", "err", err)
		s.runs.WithLabelValues(e.Name, "error").Inc()
		return
	}
	if !won {
		log.Info("schedule run by another server of the fleet")
		s.runs.WithLabelValues(e.Name, "elsewhere").Inc()
		return
	}
	ts, err := power.Select(ctx, s.cfg.Store, e.Select)
	if err != nil {
		log.Error("schedule not run: its machines", "machines", e.Select.String(), "err", err)
		s.runs.WithLabelValues(e.Name, "error").Inc()
		s.record(ctx, e, at, fmt.Sprintf("not run: %v", err), http.StatusNotFound)
		return
	}
	log.Info("schedule firing", "machines", len(ts), "wave", e.Wave.String())
	res := s.cfg.Runner.Run(power.WithCause(ctx, "schedule:"+e.Name), e.Action, ts, e.Wave, nil)
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
		}
	}
	result, status := "ok", http.StatusOK
	if failed > 0 {
		result, status = "failed", http.StatusBadGateway
	}
	s.runs.WithLabelValues(e.Name, result).Inc()
	s.mach.WithLabelValues(e.Name, "ok").Add(float64(len(res) - failed))
	s.mach.WithLabelValues(e.Name, "failed").Add(float64(failed))
	sum := fmt.Sprintf("%d machines, %d failed", len(res), failed)
	log.Info("schedule done", "machines", len(res), "failed", failed)
	s.record(ctx, e, at, sum, status)
}

// record puts a firing in the audit trail, as if a token called
// schedule:NAME had asked, and keeps it for Status.
func (s *Scheduler) record(ctx context.Context, e Entry, at time.Time, summary string, status int) {
	s.mu.Lock()
	s.last[e.Name] = Status{LastRun: at, LastResult: summary}
	s.mu.Unlock()
	err := s.cfg.Store.AddAudit(context.WithoutCancel(ctx), inventory.AuditEntry{Time: s.cfg.Now(), Token: "schedule:" + e.Name,
		Route: "SCHEDULE power " + string(e.Action), Target: e.Select.String(), Summary: summary, Status: status})
	if err != nil {
		s.cfg.Logger.Error("audit trail: record of a schedule run failed", "schedule", e.Name, "err", err)
	}
}

// Statuses lists the schedules, by name, with their next and last runs.
func (s *Scheduler) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.cfg.Entries))
	for _, e := range s.cfg.Entries {
		st := s.last[e.Name]
		st.Name, st.At, st.Action, st.Machines, st.Wave = e.Name, e.At, string(e.Action), e.Select.String(), e.Wave.String()
		st.Next = s.next[e.Name]
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
