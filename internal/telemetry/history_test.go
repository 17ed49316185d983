package telemetry

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

func openStore(t *testing.T, path string) inventory.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runHistory runs h until stop is called (at the latest by t.Cleanup),
// which waits for Run to return.
func runHistory(t *testing.T, h *History) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { stopRun(t, cancel, done) }) }
	t.Cleanup(stop)
	return stop
}

func stopRun(t *testing.T, cancel func(), done chan error) {
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of its context ending")
	}
}

// storeBoots stores n boots of 1 s, 10 min apart from t0, boot i of
// machine mac(i), and returns their records.
func storeBoots(t *testing.T, store inventory.BootRecords, n int, mac func(int) net.HardwareAddr) []inventory.BootRecord {
	t.Helper()
	f := newFake(t, Config{Ended: n})
	var recs []inventory.BootRecord
	for i := range n {
		f.now = t0.Add(time.Duration(i) * 10 * time.Minute)
		f.dora(mac(i), uefi)
		f.done(mac(i))
		rec, err := encodeBoot(<-f.r.Ended())
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := store.PutBoots(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func ids(bs []Boot) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// TestHistorySurvivesRestart: boots that completed, failed, or were still
// in progress when the server stopped are read back by a new Recorder's
// History on the same database, with their phases, newest first.
func TestHistorySurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	store := openStore(t, path)
	f := newFake(t, Config{Ended: 16})
	stop := runHistory(t, NewHistory(f.r, HistoryConfig{Store: store, Flush: 5 * time.Millisecond}))
	f.uefiBoot(macA, "10.0.0.10") // complete
	f.dora(macB, uefi)            // reaches iPXE, then starts over: failed
	f.dora(macB, ipxe)
	f.step(time.Second)
	f.dora(macB, uefi)
	f.step(time.Second)
	macC := append(macA[:5:5], 0x0c)
	f.dora(macC, uefi) // in progress at shutdown
	before, err := NewHistory(f.r, HistoryConfig{}).Boots(context.Background(), Filter{})
	if err != nil || len(before) != 4 {
		t.Fatalf("before the restart: %v, %v; want 4 boots", ids(before), err)
	}
	stop()
	store.Close()

	g := newFake(t, Config{Ended: 16})
	g.now = f.now.Add(time.Minute)
	h := NewHistory(g.r, HistoryConfig{Store: openStore(t, path)})
	g.dora(macA, uefi) // a new boot, in memory only
	got, err := h.Boots(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{bootID(macA, g.now.Add(-time.Second).UTC())}, ids(before)...)
	if !slices.Equal(ids(got), want) {
		t.Fatalf("after the restart: %v, want %v", ids(got), want)
	}
	for i, b := range got[1:] {
		if b.State != before[i].State || len(b.Phases) != len(before[i].Phases) || b.Summary != before[i].Summary {
			t.Errorf("boot %s after the restart: %s, %d phases, %+v; before: %s, %d phases, %+v", b.ID, b.State,
				len(b.Phases), b.Summary, before[i].State, len(before[i].Phases), before[i].Summary)
		}
	}
	one, ok, err := h.Boot(context.Background(), before[3].ID)
	if err != nil || !ok || one.State != StateComplete || one.Summary.TotalSeconds != 40 {
		t.Fatalf("Boot(%s) = %+v, %v, %v; want the complete 40 s boot", before[3].ID, one.Summary, ok, err)
	}
	if _, ok, err := h.Boot(context.Background(), "nope"); ok || err != nil {
		t.Fatalf("Boot(nope) = %v, %v; want not found", ok, err)
	}
	// The boot in progress at shutdown reads as failed once stale.
	g.step(2 * time.Hour)
	late, err := h.Boots(context.Background(), Filter{MAC: macC})
	if err != nil || len(late) != 1 || late[0].State != StateFailed {
		t.Fatalf("the interrupted boot two hours on: %+v, %v; want failed", late, err)
	}
}

// TestHistoryMerge: memory and store together, filtered, without a boot
// twice, the memory copy winning.
func TestHistoryMerge(t *testing.T) {
	store := openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
	// Boots at t0, t0+10m, t0+20m, t0+30m of A and B in turn.
	stored := storeBoots(t, store, 4, func(i int) net.HardwareAddr { return []net.HardwareAddr{macA, macB}[i%2] })
	// Another Recorder holds the newest boot too, with more in it than
	// the stored copy: the memory copy must win.
	g := newFake(t, Config{})
	g.now = t0.Add(30 * time.Minute)
	g.dora(macB, uefi)
	g.done(macB)
	g.r.NBDSession(macB, nbd.SessionStats{Export: "x"})
	h := NewHistory(g.r, HistoryConfig{Store: store})
	tests := []struct {
		name string
		f    Filter
		want []int // indexes into stored, newest first
	}{
		{"all", Filter{}, []int{3, 2, 1, 0}},
		{"machine", Filter{MAC: macA}, []int{2, 0}},
		{"since", Filter{Since: t0.Add(15 * time.Minute)}, []int{3, 2}},
		{"limit", Filter{Limit: 3}, []int{3, 2, 1}},
		{"all three", Filter{MAC: macB, Since: t0.Add(5 * time.Minute), Limit: 1}, []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.Boots(context.Background(), tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range tt.want {
				want = append(want, stored[i].ID)
			}
			if !slices.Equal(ids(got), want) {
				t.Fatalf("Boots(%+v) = %v, want %v", tt.f, ids(got), want)
			}
			if got[0].ID == stored[3].ID && len(got[0].NBD) != 1 {
				t.Errorf("boot %s read from the store, want the memory copy with its NBD session", got[0].ID)
			}
		})
	}
}

// TestEndedQueue: what reaches the queue, and that a full queue drops
// (counted) instead of blocking the hook.
func TestEndedQueue(t *testing.T) {
	f := newFake(t, Config{Ended: 2, MaxBoots: 2})
	f.dora(macA, uefi)
	f.done(macA)                                        // 1: complete
	f.r.NBDSession(macA, nbd.SessionStats{Export: "x"}) // 2: the complete boot again, with its session
	macC := append(macA[:5:5], 0x0c)
	f.dora(macB, uefi)
	f.dora(macC, uefi)                     // evicts A (ended: nothing) ...
	f.dora(append(macA[:5:5], 0x0d), uefi) // ... then B, unfinished: 3, dropped
	if got := f.r.dropped.Load(); got != 1 {
		t.Fatalf("dropped %d, want 1", got)
	}
	first, second := <-f.r.Ended(), <-f.r.Ended()
	if first.State != StateComplete || len(first.NBD) != 0 || second.ID != first.ID || len(second.NBD) != 1 {
		t.Fatalf("queue held %+v then %+v; want the complete boot, then it again with its NBD session", first, second)
	}
	if got := scrape(t, f.r)["bootfleet_boot_records_dropped_total"]; got != 1 {
		t.Errorf("bootfleet_boot_records_dropped_total = %v, want 1", got)
	}
	// Room again: an unfinished boot evicted from memory is queued.
	f.dora(append(macA[:5:5], 0x0e), uefi) // evicts C
	if b := <-f.r.Ended(); b.MAC != macC.String() || b.State != StateBooting {
		t.Fatalf("evicted %s %s, want %s still booting", b.MAC, b.State, macC)
	}
	// A stale boot is failed by Sweep and queued.
	f.step(2 * time.Hour)
	f.r.Sweep()
	if b := <-f.r.Ended(); b.State != StateFailed || !strings.Contains(b.Reason, "no boot complete") {
		t.Fatalf("swept %+v, want failed for want of boot complete", b)
	}
}

// TestHistoryRetention: Run prunes to MaxCount and MaxAge at start, also
// for a Recorder without a queue (telemetry off), which stores nothing.
func TestHistoryRetention(t *testing.T) {
	tests := []struct {
		name     string
		cfg      HistoryConfig
		queue    int
		wantLeft int
	}{
		{"by count", HistoryConfig{MaxCount: 3}, 16, 3},
		{"by age", HistoryConfig{MaxAge: 25 * time.Minute}, 16, 2}, // the boots at t0+80m and t0+90m
		{"defaults keep all", HistoryConfig{}, 16, 10},
		{"no queue, by count", HistoryConfig{MaxCount: 3}, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
			// Boots at t0, t0+10m ... t0+90m, each of its own machine.
			recs := storeBoots(t, store, 10, func(i int) net.HardwareAddr { return append(macA[:5:5], byte(i)) })
			f := newFake(t, Config{Ended: tt.queue})
			f.now = t0.Add(105 * time.Minute)
			cfg := tt.cfg
			cfg.Store = store
			stop := runHistory(t, NewHistory(f.r, cfg))
			var (
				left []inventory.BootRecord
				err  error
			)
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if left, err = store.ListBoots(context.Background(), inventory.BootFilter{}); err != nil || len(left) <= tt.wantLeft {
					break
				}
			}
			stop()
			if err != nil || len(left) != tt.wantLeft || left[0].ID != recs[9].ID {
				t.Fatalf("%d boots left (%v), want the newest %d", len(left), err, tt.wantLeft)
			}
		})
	}
}

// failingStore refuses every write, as a PostgreSQL that is down does.
type failingStore struct {
	inventory.BootRecords
	puts int
}

func (s *failingStore) PutBoots(context.Context, []inventory.BootRecord) error {
	s.puts++
	return errors.New("connection refused")
}

// TestHistoryStoreDown: failed writes are retried, and what waits is
// bounded by the queue size, the excess counted as dropped.
func TestHistoryStoreDown(t *testing.T) {
	f := newFake(t, Config{Ended: 4})
	st := &failingStore{}
	h := NewHistory(f.r, HistoryConfig{Store: st})
	var pending []Boot
	for i := range 6 {
		mac := append(macA[:5:5], byte(i))
		f.dora(mac, uefi)
		f.done(mac)
		pending = append(pending, <-f.r.Ended())
		pending = h.write(context.Background(), pending)
	}
	if st.puts != 6 || len(pending) != 4 || f.r.dropped.Load() != 2 || pending[3].MAC != append(macA[:5:5], 5).String() {
		t.Fatalf("after 6 failed writes: %d puts, %d pending, %d dropped; want 6, the newest 4, 2", st.puts, len(pending), f.r.dropped.Load())
	}
}

func TestBootCodec(t *testing.T) {
	f := newFake(t, Config{})
	f.uefiBoot(macA, "10.0.0.10")
	b, _ := f.r.Boot(bootID(macA, t0))
	rec, err := encodeBoot(b)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*inventory.BootRecord)
		err  string
	}{
		{"round trip", func(*inventory.BootRecord) {}, ""},
		{"not JSON", func(r *inventory.BootRecord) { r.Record = []byte("{") }, "want the JSON of a boot record"},
		{"another boot", func(r *inventory.BootRecord) { r.ID = "x" }, `want boot "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rec
			tt.edit(&r)
			got, err := decodeBoot(r)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("decode: %v, want an error containing %q", err, tt.err)
				}
				return
			}
			got.derive()
			if err != nil || got.Summary != b.Summary || len(got.Phases) != len(b.Phases) || got.End == nil || !got.End.Equal(*b.End) {
				t.Fatalf("decode(encode(b)) = %+v, %v; want %+v", got, err, b)
			}
		})
	}
}

// TestRecorderWithoutQueue: with telemetry off the Recorder still times
// each boot for the DoneURL and lists it, but its History stores nothing,
// neither when the boot ends nor at shutdown.
func TestRecorderWithoutQueue(t *testing.T) {
	store := openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
	f := newFake(t, Config{})
	h := NewHistory(f.r, HistoryConfig{Store: store, Flush: time.Millisecond})
	stop := runHistory(t, h)
	f.dora(macA, uefi)
	f.step(30 * time.Second)
	f.dora(macB, uefi) // still booting at shutdown
	if took, ok := f.done(macA); !ok || took != 32*time.Second {
		t.Fatalf("boot complete: took %v, %v; want 32s", took, ok)
	}
	got, err := h.Boots(context.Background(), Filter{MAC: macA})
	if err != nil || len(got) != 1 || got[0].State != StateComplete || got[0].Summary.TotalSeconds != 32 {
		t.Fatalf("boots of %s: %+v, %v; want one complete boot of 32 s", macA, got, err)
	}
	stop()
	if recs, err := store.ListBoots(context.Background(), inventory.BootFilter{}); err != nil || len(recs) != 0 {
		t.Fatalf("stored %d boot records (%v), want none", len(recs), err)
	}
}
