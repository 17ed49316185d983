package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func bootRec(m string, start time.Time, state string) inventory.BootRecord {
	return inventory.BootRecord{ID: fmt.Sprintf("%s-%d", m, start.UnixMilli()), MAC: mac(m), Start: start,
		State: state, Record: []byte(`{"state":"` + state + `"}`)}
}

func bootIDs(bs []inventory.BootRecord) []string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	return ids
}

func testBoots(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	a, z := "52:54:00:00:00:0a", "52:54:00:00:00:0b"
	recs := []inventory.BootRecord{
		bootRec(a, t0, "complete"),
		bootRec(z, t0.Add(time.Minute), "failed"),
		bootRec(a, t0.Add(2*time.Minute), "booting"),
	}
	if err := s.PutBoots(c, recs); err != nil {
		t.Fatal(err)
	}
	// Written again (an NBD session arrived after it ended): replaced.
	again := recs[2]
	again.State, again.Record = "complete", []byte(`{"state":"complete","nbd":[]}`)
	if err := s.PutBoots(c, []inventory.BootRecord{again}); err != nil {
		t.Fatal(err)
	}
	got := must[inventory.BootRecord](t)(s.GetBoot(c, again.ID))
	if got.State != "complete" || string(got.Record) != string(again.Record) || !got.Start.Equal(again.Start) || got.MAC.String() != a {
		t.Fatalf("GetBoot after replace = %+v, want %+v", got, again)
	}
	_, err := s.GetBoot(c, "nope")
	wantErr(t, err, inventory.ErrNotFound, "id")
	tests := []struct {
		name string
		f    inventory.BootFilter
		want []string
	}{
		{"all, newest first", inventory.BootFilter{}, []string{again.ID, recs[1].ID, recs[0].ID}},
		{"machine", inventory.BootFilter{MAC: mac(a)}, []string{again.ID, recs[0].ID}},
		{"since is inclusive", inventory.BootFilter{Since: t0.Add(time.Minute)}, []string{again.ID, recs[1].ID}},
		{"limit", inventory.BootFilter{Limit: 1}, []string{again.ID}},
		{"until is exclusive", inventory.BootFilter{Until: t0.Add(2 * time.Minute)}, []string{recs[1].ID, recs[0].ID}},
		{"machine between", inventory.BootFilter{MAC: mac(a), Since: t0, Until: t0.Add(time.Minute)}, []string{recs[0].ID}},
		{"nothing", inventory.BootFilter{Since: t0.Add(time.Hour)}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := bootIDs(must[[]inventory.BootRecord](t)(s.ListBoots(c, tt.f)))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ListBoots(%+v) = %v, want %v", tt.f, got, tt.want)
			}
		})
	}
	// One invalid record: none of the batch is written.
	bad := bootRec(z, t0.Add(3*time.Minute), "")
	wantErr(t, s.PutBoots(c, []inventory.BootRecord{bootRec(z, t0.Add(4*time.Minute), "complete"), bad}), inventory.ErrInvalid, "state")
	if n := len(must[[]inventory.BootRecord](t)(s.ListBoots(c, inventory.BootFilter{}))); n != 3 {
		t.Fatalf("%d boots after a refused batch, want 3", n)
	}
	s = b.Reopen(t, s)
	if n := len(must[[]inventory.BootRecord](t)(s.ListBoots(c, inventory.BootFilter{}))); n != 3 {
		t.Fatalf("%d boots after reopening, want 3", n)
	}
}

func testBootPrune(t *testing.T, b Backend) {
	t0 := time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC)
	// Ten boots a minute apart, two of them at the same instant, so count
	// pruning must break the tie by ID.
	ten := func() []inventory.BootRecord {
		var recs []inventory.BootRecord
		for i := range 9 {
			recs = append(recs, bootRec(fmt.Sprintf("52:54:00:00:01:%02x", i), t0.Add(time.Duration(i)*time.Minute), "complete"))
		}
		return append(recs, bootRec("52:54:00:00:01:ff", t0.Add(8*time.Minute), "complete"))
	}
	tests := []struct {
		name       string
		before     time.Time
		keep, max  int
		deleted    int
		remain     int
		oldestLeft time.Time
	}{
		{"by age", t0.Add(3 * time.Minute), 100, 100, 3, 7, t0.Add(3 * time.Minute)},
		{"by count", time.Time{}, 4, 100, 6, 4, t0.Add(6 * time.Minute)},
		{"count splits a tie", time.Time{}, 1, 100, 9, 1, t0.Add(8 * time.Minute)},
		{"both: the stricter wins", t0.Add(5 * time.Minute), 8, 100, 5, 5, t0.Add(5 * time.Minute)},
		{"bounded per call, oldest first", time.Time{}, 0, 4, 4, 6, t0.Add(4 * time.Minute)},
		{"nothing to do", t0, 10, 100, 0, 10, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := b.New(t)
			c := ctx(t)
			if err := s.PutBoots(c, ten()); err != nil {
				t.Fatal(err)
			}
			n, err := s.PruneBoots(c, tt.before, tt.keep, tt.max)
			if err != nil || n != tt.deleted {
				t.Fatalf("PruneBoots = %d, %v, want %d deleted", n, err, tt.deleted)
			}
			left := must[[]inventory.BootRecord](t)(s.ListBoots(c, inventory.BootFilter{}))
			if len(left) != tt.remain || !left[len(left)-1].Start.Equal(tt.oldestLeft) {
				t.Fatalf("after pruning: %v, want %d boots, the oldest at %v", bootIDs(left), tt.remain, tt.oldestLeft)
			}
		})
	}
}
