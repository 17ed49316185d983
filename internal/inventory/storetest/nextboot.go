package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func testNextBoot(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	seed(t, s)
	pc := mac("52:54:00:00:00:01")
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: pc, Profile: "linux"}))

	if got := must[string](t)(s.GetNextBoot(c, pc)); got != "" {
		t.Fatalf("GetNextBoot of a fresh machine = %q, want none", got)
	}
	if err := s.SetNextBoot(c, pc, "rescue"); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	if got := must[string](t)(s.GetNextBoot(c, pc)); got != "rescue" {
		t.Fatalf("GetNextBoot after reopen = %q, want rescue", got)
	}
	// Servers racing for one boot: exactly one takes the override.
	var wg sync.WaitGroup
	got := make([]string, 6)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.TakeNextBoot(c, pc)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	n := 0
	for _, v := range got {
		if v == "rescue" {
			n++
		} else if v != "" {
			t.Fatalf("TakeNextBoot = %q, want rescue or nothing", v)
		}
	}
	if n != 1 {
		t.Fatalf("%d of 6 racing takes got the override, want exactly 1: %q", n, got)
	}
	if got := must[string](t)(s.GetNextBoot(c, pc)); got != "" {
		t.Fatalf("GetNextBoot after the take = %q, want none: it is one-shot", got)
	}

	if err := s.SetNextBoot(c, pc, inventory.NextBootLocal); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNextBoot(c, pc, ""); err != nil {
		t.Fatal(err)
	}
	if got := must[string](t)(s.GetNextBoot(c, pc)); got != "" {
		t.Fatalf("GetNextBoot after clearing = %q, want none", got)
	}
	wantErr(t, s.SetNextBoot(c, pc, "nope"), inventory.ErrInvalid, "target")
	wantErr(t, s.SetNextBoot(c, mac("52:54:00:00:00:99"), "rescue"), inventory.ErrNotFound, "mac")
	// An override dies with its machine.
	if err := s.SetNextBoot(c, pc, "rescue"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMachine(c, pc); err != nil {
		t.Fatal(err)
	}
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: pc}))
	if got := must[string](t)(s.GetNextBoot(c, pc)); got != "" {
		t.Fatalf("a re-added machine inherits next boot %q, want none", got)
	}
}

func testScheduleRuns(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	at := time.Date(2026, 3, 2, 7, 30, 0, 0, time.UTC)
	// Servers of a fleet firing together: one claim wins.
	var wg sync.WaitGroup
	won := make([]bool, 5)
	for i := range won {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.ClaimScheduleRun(c, "lab-morning", at, fmt.Sprintf("srv%d", i))
			if err != nil {
				t.Error(err)
			}
			won[i] = ok
		}()
	}
	wg.Wait()
	if n := countTrue(won); n != 1 {
		t.Fatalf("%d of 5 servers claimed one firing, want 1: %v", n, won)
	}
	if ok := must[bool](t)(s.ClaimScheduleRun(c, "lab-morning", at.Add(24*time.Hour), "srv0")); !ok {
		t.Fatal("the next day's firing was refused")
	}
	if ok := must[bool](t)(s.ClaimScheduleRun(c, "lab-night", at, "srv0")); !ok {
		t.Fatal("another schedule's firing at the same time was refused")
	}
	_, err := s.ClaimScheduleRun(c, "", at, "srv0")
	wantErr(t, err, inventory.ErrInvalid, "name")
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func testPowerSchedules(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	lab := inventory.PowerSchedule{Name: "lab-morning", At: "30 7 * * 1-5", Action: "on", Profile: "lab", Wave: "20/10s"}
	pcs := inventory.PowerSchedule{Name: "pcs-night", At: "0 22 * * *", Action: "off", Machines: []string{"pc1", "52:54:00:00:00:02"}}
	for _, p := range []inventory.PowerSchedule{lab, pcs} {
		if err := s.PutSchedule(c, p); err != nil {
			t.Fatal(err)
		}
	}
	lab.Wave = ""
	if err := s.PutSchedule(c, lab); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	got := must[[]inventory.PowerSchedule](t)(s.ListSchedules(c))
	if len(got) != 2 || got[0].Name != "lab-morning" || got[0].Wave != "" || got[1].Machines[1] != "52:54:00:00:00:02" || got[1].All {
		t.Fatalf("ListSchedules = %+v, want lab-morning replaced (no wave) and pcs-night with its machines", got)
	}
	wantErr(t, s.PutSchedule(c, inventory.PowerSchedule{Name: "x", At: "0 1 * * *", Action: "on", All: true, Profile: "lab"}), inventory.ErrInvalid, "machines")
	wantErr(t, s.PutSchedule(c, inventory.PowerSchedule{Name: "bad name", At: "0 1 * * *", Action: "on", All: true}), inventory.ErrInvalid, "name")
	if err := s.DeleteSchedule(c, "pcs-night"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, s.DeleteSchedule(c, "pcs-night"), inventory.ErrNotFound, "name")
	if got := must[[]inventory.PowerSchedule](t)(s.ListSchedules(c)); len(got) != 1 {
		t.Fatalf("after delete: %+v, want lab-morning only", got)
	}
}
