package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
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
	Source inventory.Source // config (the file's) or api (stored)
}

// FromConfig parses the config's schedules. Config validation has checked
// them; an error here means it was skipped.
func FromConfig(cs []config.Schedule) ([]Entry, error) {
	var out []Entry
	for i, c := range cs {
		e, err := Parse(inventory.PowerSchedule{Name: c.Name, At: c.At, Action: c.Action, Profile: c.Profile,
			Machines: c.Machines, All: c.All, Wave: c.Wave})
		if err != nil {
			return nil, fmt.Errorf("schedules[%d]: %w", i, err)
		}
		e.Source = inventory.SourceConfig
		out = append(out, e)
	}
	return out, nil
}

// Parse checks a schedule and returns its entry (source api). Its errors
// are *inventory.Error naming the field at fault.
func Parse(p inventory.PowerSchedule) (Entry, error) {
	if err := p.Validate(); err != nil {
		return Entry{}, err
	}
	spec, err := cron.ParseStandard(p.At)
	if err != nil {
		return Entry{}, inventory.Invalid("at", "want a cron expression like \"30 7 * * 1-5\" (minute hour day month weekday), got %q: %v", p.At, err)
	}
	a, err := power.ParseAction(p.Action)
	if err != nil || a == power.Status {
		return Entry{}, inventory.Invalid("action", "want on, off, cycle or reset, got %q", p.Action)
	}
	w, err := power.ParseWave(p.Wave)
	if err != nil {
		return Entry{}, inventory.Invalid("wave", "%v", err)
	}
	return Entry{Name: p.Name, At: p.At, spec: spec, Action: a, Wave: w, Source: inventory.SourceAPI,
		Select: power.Selection{Machines: p.Machines, Profile: p.Profile, All: p.All}}, nil
}

// Runner carries a command out (a *power.Runner).
type Runner interface {
	Run(ctx context.Context, a power.Action, ts []power.Target, w power.Wave, report func(power.Event)) []power.Result
}

// Store is what the scheduler reads and writes in the inventory.
type Store interface {
	power.Inventory
	inventory.ScheduleRuns
	ListSchedules(ctx context.Context) ([]inventory.PowerSchedule, error)
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
	// Reload is how often the schedules stored through the API are read
	// again, for those another server added; default 30s. Changed reads
	// them at once.
	Reload time.Duration
	Logger *slog.Logger                         // default: discard
	Now    func() time.Time                     // default time.Now
	After  func(time.Duration) <-chan time.Time // default time.After; tests fire schedules with it
}

// Scheduler fires the entries; Run until ctx ends.
type Scheduler struct {
	cfg  Config
	runs *prometheus.CounterVec
	mach *prometheus.CounterVec

	changed chan struct{}

	mu      sync.Mutex
	entries []Entry // the config's, then the stored ones not named like one of them
	last    map[string]Status
	next    map[string]time.Time
}

// Status is a schedule as GET /schedules shows it.
type Status struct {
	Name, At, Action, Machines, Wave, Source string
	Next                                     time.Time
	LastRun                                  time.Time // zero: not yet run by this server
	LastResult                               string    // e.g. "6 machines, 0 failed"
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
	if cfg.Reload <= 0 {
		cfg.Reload = 30 * time.Second
	}
	s := &Scheduler{cfg: cfg, last: map[string]Status{}, next: map[string]time.Time{}, changed: make(chan struct{}, 1),
		entries: slices.Clone(cfg.Entries),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_schedule_runs_total",
			Help: "Firings of power schedules, by schedule and result: ok, failed (some machine failed), error (none ran), elsewhere (another server of the fleet ran it)."},
			[]string{"schedule", "result"}),
		mach: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_schedule_machines_total",
			Help: "Machines power schedules acted on, by schedule and result (ok, failed)."}, []string{"schedule", "result"}),
	}
	now := cfg.Now()
	for _, e := range s.entries {
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
// once the runs in flight have ended. It reads the stored schedules at
// start, every Reload and after Changed. A clock that jumps (a suspended
// host) fires a missed entry once, not once per missed time.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		s.reload(ctx)
		wait := s.cfg.Reload
		if due, ok := s.soonest(); ok {
			wait = min(wait, max(due.Sub(s.cfg.Now()), 0))
		}
		select {
		case <-s.cfg.After(wait):
		case <-s.changed:
			continue
		case <-ctx.Done():
			return nil
		}
		now := s.cfg.Now()
		s.mu.Lock()
		var due []Entry
		var ats []time.Time
		for _, e := range s.entries {
			if at := s.next[e.Name]; !at.After(now) {
				due, ats = append(due, e), append(ats, at)
				s.next[e.Name] = e.spec.Next(now)
			}
		}
		s.mu.Unlock()
		for i, e := range due {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.fire(ctx, e, ats[i])
			}()
		}
	}
}

// Changed makes Run read the stored schedules now (the API wrote one).
func (s *Scheduler) Changed() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// reload reads the stored schedules: new ones get their next time, gone
// ones are dropped, changed ones start over. A config schedule's name
// wins over a stored one's. A stored schedule that does not parse is
// logged and left out; the others run.
func (s *Scheduler) reload(ctx context.Context) {
	stored, err := s.cfg.Store.ListSchedules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Error("schedules: reading those added through the API failed; keeping the last read", "err", err)
		}
		return
	}
	entries := slices.Clone(s.cfg.Entries)
	fromConfig := map[string]bool{}
	for _, e := range entries {
		fromConfig[e.Name] = true
	}
	for _, p := range stored {
		if fromConfig[p.Name] {
			continue
		}
		e, err := Parse(p)
		if err != nil {
			s.cfg.Logger.Error("schedule left out: it does not parse; fix or remove it (bootfleet power schedule rm)", "schedule", p.Name, "err", err)
			continue
		}
		entries = append(entries, e)
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]Entry{}
	for _, e := range s.entries {
		old[e.Name] = e
	}
	next := map[string]time.Time{}
	for _, e := range entries {
		if o, ok := old[e.Name]; ok && o.At == e.At {
			next[e.Name] = s.next[e.Name]
		} else {
			next[e.Name] = e.spec.Next(now)
		}
	}
	s.entries, s.next = entries, next
}

func (s *Scheduler) soonest() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t time.Time
	for _, n := range s.next {
		if t.IsZero() || n.Before(t) {
			t = n
		}
	}
	return t, !t.IsZero()
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
	out := make([]Status, 0, len(s.entries))
	for _, e := range s.entries {
		st := s.last[e.Name]
		st.Name, st.At, st.Action, st.Machines, st.Wave = e.Name, e.At, string(e.Action), e.Select.String(), e.Wave.String()
		st.Source = string(e.Source)
		st.Next = s.next[e.Name]
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
