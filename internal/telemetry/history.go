package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// HistoryConfig configures a History. Zero values select the defaults.
type HistoryConfig struct {
	// Store keeps the boots that ended. Nil: the History reads the
	// Recorder only and Run does nothing.
	Store inventory.BootRecords
	// MaxAge drops stored boots that started longer ago. Default 30 days.
	MaxAge time.Duration
	// MaxCount bounds the stored boots; the oldest go first. Default
	// 100000 (a few hundred MB at most; typically tens).
	MaxCount int
	// Flush is how long an ended boot may wait for others to share its
	// write. A kill -9 loses at most the boots that ended in the last
	// Flush. Default 1s.
	Flush time.Duration
	// Prune is how often retention runs, and stale open boots are failed
	// so they get stored. Default 1m.
	Prune time.Duration
	// Logger reports store failures, dropped records and pruning.
	// Default slog.Default().
	Logger *slog.Logger
}

// Write and prune bounds: one transaction each, short, because DHCP's
// lease commits wait on the same database writer.
const (
	writeBatch  = 256
	pruneBatch  = 500
	pruneRounds = 1000 // per Prune tick; the rest waits for the next one
)

// History is every boot: the Recorder's recent and in-progress ones and
// those stored in the inventory. Run moves ended boots from the
// Recorder's queue to the store in batches, off the hot paths, and
// enforces retention; Boots and Boot read both, the Recorder winning for
// a boot in both.
type History struct {
	rec   *Recorder
	cfg   HistoryConfig
	log   *slog.Logger
	store inventory.BootRecords
}

// NewHistory returns the history of rec's boots. rec needs Config.Ended
// for boots to reach the store; without it the History reads the store
// and keeps its retention, and rec's boots stay in memory.
func NewHistory(rec *Recorder, cfg HistoryConfig) *History {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 30 * 24 * time.Hour
	}
	if cfg.MaxCount <= 0 {
		cfg.MaxCount = 100000
	}
	if cfg.Flush <= 0 {
		cfg.Flush = time.Second
	}
	if cfg.Prune <= 0 {
		cfg.Prune = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &History{rec: rec, cfg: cfg, log: cfg.Logger, store: cfg.Store}
}

// Run stores ended boots and prunes old ones until ctx is done; then it
// stores what is queued and the boots still in progress (they read as
// failed once stale, unless the machine completes them first) and
// returns nil. Without the Recorder's queue it only prunes.
func (h *History) Run(ctx context.Context) error {
	if h.store == nil {
		<-ctx.Done()
		return nil
	}
	var flush <-chan time.Time // nil without a queue: nothing to store
	if h.rec.Ended() != nil {
		t := time.NewTicker(h.cfg.Flush)
		defer t.Stop()
		flush = t.C
	}
	prune := time.NewTicker(h.cfg.Prune)
	defer prune.Stop()
	h.prune(ctx)
	var (
		pending []Boot
		dropped uint64
	)
	for {
		select {
		case b := <-h.rec.Ended():
			if pending = append(pending, b); len(pending) >= writeBatch {
				pending = h.write(ctx, pending)
			}
		case <-flush:
			pending = h.write(ctx, append(pending, h.rec.quiet()...))
			if n := h.rec.dropped.Load(); n != dropped {
				h.log.Warn("boot records dropped: the write queue was full or the store kept failing (see the warnings before)",
					"dropped", n-dropped, "dropped_total", n)
				dropped = n
			}
		case <-prune.C:
			h.rec.Sweep()
			h.prune(ctx)
		case <-ctx.Done():
			return h.final(pending)
		}
	}
}

// final stores what is left at shutdown, with a bounded wait of its own
// since ctx is done.
func (h *History) final(pending []Boot) error {
	if h.rec.Ended() == nil {
		return nil // a Recorder without a queue keeps its boots in memory
	}
	for drained := false; !drained; {
		select {
		case b := <-h.rec.Ended():
			pending = append(pending, b)
		default:
			drained = true
		}
	}
	pending = append(pending, h.rec.Open()...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if left := h.write(ctx, pending); len(left) > 0 {
		h.log.Warn("boot records not stored at shutdown", "boots", len(left))
	}
	return nil
}

// write stores pending, newest copy of each boot only, and returns what
// failed, to retry at the next flush. What would grow past the Recorder's
// queue size is dropped instead, oldest first, so a store that stays
// down cannot hold memory without bound.
func (h *History) write(ctx context.Context, pending []Boot) []Boot {
	if len(pending) == 0 {
		return pending
	}
	last := map[string]int{}
	for i, b := range pending {
		last[b.ID] = i
	}
	recs := make([]inventory.BootRecord, 0, len(last))
	keep := pending[:0]
	for i, b := range pending {
		if last[b.ID] != i {
			continue
		}
		rec, err := encodeBoot(b)
		if err != nil {
			h.log.Error("boot record not stored", "boot", b.ID, "err", err)
			continue
		}
		recs = append(recs, rec)
		keep = append(keep, b)
	}
	for len(recs) > 0 {
		n := min(len(recs), writeBatch)
		if err := h.store.PutBoots(ctx, recs[:n]); err != nil {
			h.log.Warn("boot records not stored; retrying at the next flush", "boots", len(recs), "err", err)
			keep = keep[len(keep)-len(recs):]
			if over := len(keep) - cap(h.rec.ended); over > 0 {
				h.rec.dropped.Add(uint64(over))
				h.rec.m.recordsDropped.Add(float64(over))
				keep = keep[over:]
			}
			return keep
		}
		h.rec.m.recordsStored.Add(float64(n))
		recs = recs[n:]
	}
	return pending[:0]
}

// prune enforces MaxAge and MaxCount in short transactions.
func (h *History) prune(ctx context.Context) {
	before := h.rec.cfg.Now().Add(-h.cfg.MaxAge)
	total := 0
	for range pruneRounds {
		n, err := h.store.PruneBoots(ctx, before, h.cfg.MaxCount, pruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("boot retention: pruning failed; retrying at the next round", "err", err)
			}
			break
		}
		if total += n; n < pruneBatch {
			break
		}
	}
	if total > 0 {
		h.log.Info("boot retention: old boot records deleted", "boots", total,
			"max_age", h.cfg.MaxAge.String(), "max_count", h.cfg.MaxCount)
	}
}

// Boots returns the boots that match f, newest first, from memory and
// the store; a record in both is read from memory, which is newer. The
// records of a boot that several servers of a fleet served read as one
// boot (merge.go).
func (h *History) Boots(ctx context.Context, f Filter) ([]Boot, error) {
	if h.store == nil {
		return h.rec.Boots(f), nil // one server's records never merge
	}
	// A boot that started just before Since may have parts after it.
	since := f.Since
	if !since.IsZero() {
		since = since.Add(-mergeLookback)
	}
	// A boot's parts are several records: read more than asked.
	lim := 0
	if f.Limit > 0 {
		lim = 2*f.Limit + 16
	}
	mem := h.rec.Boots(Filter{MAC: f.MAC, Since: since, Limit: lim})
	recs, err := h.store.ListBoots(ctx, inventory.BootFilter{MAC: f.MAC, Since: since, Limit: lim})
	if err != nil {
		return nil, err
	}
	out := pick(mergeBoots(h.withStored(mem, recs), h.rec.cfg.StaleAfter), f)
	if lim > 0 && (len(mem) == lim || len(recs) == lim) && slices.ContainsFunc(out, merged) {
		// A source the limit cut short may hold the files of a boot but
		// not its DHCP record, which starts earlier (in a storm, before
		// the files of every newer boot), nor the records of a boot that
		// started between them: read everything again from mergeLookback
		// before the oldest record read, up to a bound.
		from := oldest(out, mem, recs).Add(-mergeLookback)
		if from.Before(since) {
			from = since
		}
		mem = h.rec.Boots(Filter{MAC: f.MAC, Since: from})
		if recs, err = h.store.ListBoots(ctx, inventory.BootFilter{MAC: f.MAC, Since: from, Limit: 8*lim + 4096}); err != nil {
			return nil, err
		}
		out = pick(mergeBoots(h.withStored(mem, recs), h.rec.cfg.StaleAfter), f)
	}
	now := h.rec.cfg.Now().UTC()
	for i := range out {
		h.rec.settle(&out[i], now)
		out[i].derive()
	}
	return out, nil
}

// merged says whether b is, or may be, one part of a boot several
// servers served: then its other parts may be older than the records a
// limited read returned. So may the power record of a fleet's boot
// without a cause, up to powerWindow older. A lone server's boots never
// are.
func merged(b Boot) bool { return b.Partial || len(b.Parts) > 0 || b.Server != "" && b.Power == nil }

// pick returns the newest boots of merged (newest first) that started
// since f.Since, at most f.Limit.
func pick(merged []Boot, f Filter) []Boot {
	out := []Boot{}
	for _, b := range merged {
		if b.Start.Before(f.Since) {
			continue
		}
		if out = append(out, b); f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out
}

// oldest is the earliest start among the boots picked and the oldest
// record each source returned (all are newest first).
func oldest(out, mem []Boot, recs []inventory.BootRecord) time.Time {
	var t time.Time
	see := func(x time.Time) {
		if t.IsZero() || x.Before(t) {
			t = x
		}
	}
	if len(out) > 0 {
		see(out[len(out)-1].Start)
	}
	if len(mem) > 0 {
		see(mem[len(mem)-1].Start)
	}
	if len(recs) > 0 {
		see(recs[len(recs)-1].Start)
	}
	return t
}

// withStored adds to mem the stored records it does not hold, each once.
func (h *History) withStored(mem []Boot, recs []inventory.BootRecord) []Boot {
	seen := make(map[string]bool, len(mem))
	for _, b := range mem {
		seen[b.ID] = true
	}
	out := mem
	for _, rec := range recs {
		if seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		b, err := decodeBoot(rec)
		if err != nil {
			h.log.Warn("stored boot record skipped", "err", err)
			continue
		}
		out = append(out, b)
	}
	return out
}

// Boot returns the boot with id, or the boot a record with id is part
// of, from memory and the store.
func (h *History) Boot(ctx context.Context, id string) (Boot, bool, error) {
	mac, at, ok := parseBootID(id)
	if !ok || h.store == nil {
		return h.bootByID(ctx, id)
	}
	// Every part of the boot starts within StaleAfter of the record's
	// start, and so do the boots that bound it; its power record within
	// powerWindow before it.
	span := h.rec.cfg.StaleAfter + mergeSkew
	since := at.Add(-max(span, powerWindow+mergeSkew))
	mem := slices.DeleteFunc(h.rec.Boots(Filter{MAC: mac, Since: since}), func(b Boot) bool {
		return !b.Start.Before(at.Add(span))
	})
	recs, err := h.store.ListBoots(ctx, inventory.BootFilter{MAC: mac, Since: since, Until: at.Add(span)})
	if err != nil {
		return Boot{}, false, err
	}
	merged := mergeBoots(h.withStored(mem, recs), h.rec.cfg.StaleAfter)
	for i := len(merged) - 1; i >= 0; i-- { // oldest first: a partial record's first events
		if b := merged[i]; b.ID == id || slices.Contains(b.Parts, id) {
			h.rec.settle(&b, h.rec.cfg.Now().UTC())
			b.derive()
			return b, true, nil
		}
	}
	return Boot{}, false, nil
}

// bootByID returns the record with id from memory, else from the store.
func (h *History) bootByID(ctx context.Context, id string) (Boot, bool, error) {
	if b, ok := h.rec.Boot(id); ok || h.store == nil {
		return b, ok, nil
	}
	rec, err := h.store.GetBoot(ctx, id)
	if errors.Is(err, inventory.ErrNotFound) {
		return Boot{}, false, nil
	}
	if err != nil {
		return Boot{}, false, err
	}
	b, err := decodeBoot(rec)
	if err != nil {
		return Boot{}, false, err
	}
	h.rec.settle(&b, h.rec.cfg.Now().UTC())
	b.derive()
	return b, true, nil
}
