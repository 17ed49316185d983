package telemetry

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/storm"
)

// powered: server s ran a power command for the machine.
func powered(s string, mac net.HardwareAddr, action, cause string) fleetStep {
	return func(tf *testFleet) { tf.recs[s].Powered(mac, action, cause) }
}

// stored is every server's records as their shared store would hold
// them: those in memory, and the power records in their queues, through
// the store's encoding.
func (tf *testFleet) stored(t *testing.T) []Boot {
	t.Helper()
	out := tf.records()
	for _, r := range tf.recs {
		for len(r.Ended()) > 0 {
			b := <-r.Ended()
			if !isPowerRecord(b) {
				continue // a boot that ended: its newer copy is in memory
			}
			rec, err := encodeBoot(b)
			if err != nil {
				t.Fatal(err)
			}
			if b, err = decodeBoot(rec); err != nil || !isPowerRecord(b) {
				t.Fatalf("power record %s read back as %+v, %v", rec.ID, b, err)
			}
			out = append(out, b)
		}
	}
	return out
}

// causes is, per boot newest first, the power command it followed.
func causes(bs []Boot) string {
	var out []string
	for _, b := range bs {
		if b.Power == nil {
			out = append(out, "-")
			continue
		}
		out = append(out, b.Power.Action+" "+b.Power.Cause)
	}
	return strings.Join(out, " | ")
}

// TestMergePower: in a fleet, a boot carries the power command that
// started it whichever server ran the command and whichever recorded the
// boot; a command ties to at most one boot and never reads as one.
func TestMergePower(t *testing.T) {
	tests := []struct {
		name         string
		steps        []fleetStep
		boots, power string // describe and causes of the merged boots, newest first
	}{
		{"a powers on, b answers and takes the DoneURL", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(5 * time.Second), heard("b", macA, uefi), sent("b", macA, "vmlinuz"),
			doneOn("b", macA)},
			"complete by=b servers= dhcp=2 files=1 nbd=0 done=b", "on api:admin"},
		{"a command no boot followed shows nothing", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(time.Hour)}, "", ""},
		{"nor does it show on another machine's boot", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(5 * time.Second), heard("b", macB, uefi)},
			"booting by=b servers= dhcp=2 files=0 nbd=0 done=", "-"},
		{"a boot after the window follows something else", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(powerWindow + time.Second), heard("b", macA, uefi)},
			"booting by=b servers= dhcp=2 files=0 nbd=0 done=", "-"},
		{"a boot just within the window", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(powerWindow - 2*time.Second), heard("b", macA, uefi)},
			"booting by=b servers= dhcp=2 files=0 nbd=0 done=", "on api:admin"},
		{"b's clock a second behind a's", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(-time.Second), heard("b", macA, uefi)},
			"booting by=b servers= dhcp=2 files=0 nbd=0 done=", "on api:admin"},
		{"a boot running before the command keeps none, the next takes it", []fleetStep{
			heard("b", macA, ipxe), wait(30 * time.Second), powered("a", macA, "cycle", "schedule:night"), wait(10 * time.Second),
			heard("b", macA, uefi), doneOn("b", macA)},
			"complete by=b servers= dhcp=2 files=0 nbd=0 done=b | failed by=b servers= dhcp=2 files=0 nbd=0 done=",
			"cycle schedule:night | -"},
		{"of two commands before one boot, the latest", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(20 * time.Second), powered("c", macA, "reset", "schedule:lab"),
			wait(5 * time.Second), heard("b", macA, uefi)},
			"booting by=b servers= dhcp=2 files=0 nbd=0 done=", "reset schedule:lab"},
		{"the server that ran it answers too: one boot, one cause", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(5 * time.Second), heard("a", macA, ipxe), sent("b", macA, "vmlinuz"),
			doneOn("b", macA)},
			"complete by=a servers=a,b dhcp=2 files=1 nbd=0 done=b", "on api:admin"},
		{"a command ties to one boot, not to the next its server sees", []fleetStep{
			powered("a", macA, "on", "api:admin"), wait(5 * time.Second), heard("b", macA, ipxe), doneOn("b", macA),
			wait(time.Minute), heard("a", macA, ipxe)},
			"booting by=a servers= dhcp=2 files=0 nbd=0 done= | complete by=b servers= dhcp=2 files=0 nbd=0 done=b",
			"- | on api:admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFleet(Config{Ended: 64}, "a", "b", "c")
			for _, s := range tt.steps {
				s(tf)
			}
			got := mergeBoots(tf.stored(t), time.Hour)
			if d, c := describe(got), causes(got); d != tt.boots || c != tt.power {
				t.Fatalf("merged:\n got %s\n     %s\nwant %s\n     %s", d, c, tt.boots, tt.power)
			}
			for _, b := range got {
				if b.Power != nil && !b.Power.Time.Before(b.Start.Add(mergeSkew)) {
					t.Errorf("boot %s started at %v, before its power command at %v", b.ID, b.Start, b.Power.Time)
				}
			}
		})
	}
}

// TestMergeKeepsPartsCause: a merged boot keeps the cause of whichever
// server's part carries it, here the files' server that ran the command,
// without its power record.
func TestMergeKeepsPartsCause(t *testing.T) {
	tf := newTestFleet(Config{}, "a", "b")
	for _, s := range []fleetStep{powered("a", macA, "on", "api:admin"), wait(5 * time.Second), heard("b", macA, ipxe),
		sent("a", macA, "vmlinuz"), doneOn("b", macA)} {
		s(tf)
	}
	got := mergeBoots(tf.records(), time.Hour)
	if d, c := describe(got), causes(got); d != "complete by=b servers=a,b dhcp=2 files=1 nbd=0 done=b" || c != "on api:admin" {
		t.Fatalf("merged: %s (%s), want one boot by b, served by a and b, with a's power on", d, c)
	}
}

// TestLoneServerStoresNoPowerRecord: outside a fleet a power command
// stays in memory, as its boots do until they end.
func TestLoneServerStoresNoPowerRecord(t *testing.T) {
	f := newFake(t, Config{Ended: 8})
	f.r.Powered(macA, "on", "api:admin")
	if n := len(f.r.Ended()); n != 0 {
		t.Fatalf("a lone server queued %d records for a power command, want none", n)
	}
}

// TestFleetPowerHistory: a powers two machines on, b answers one's DHCP;
// through the shared store, both servers list that boot with a's cause
// and nothing for the other machine, and storm --real times it from the
// power-on.
func TestFleetPowerHistory(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			ctx := context.Background()
			tf, hs := runFleet(t, store)
			powerAt := tf.time()
			powered("a", macA, "on", "api:admin")(tf)
			powered("a", macB, "on", "api:admin")(tf) // macB never boots
			wait(7 * time.Second)(tf)
			heard("b", macA, uefi)(tf)
			answered("b", macA)(tf)
			wait(20 * time.Second)(tf)
			doneOn("b", macA)(tf)
			// Bounded wait for the writers: two power records from a, the
			// boot from b.
			var recs []inventory.BootRecord
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				var err error
				if recs, err = store.ListBoots(ctx, inventory.BootFilter{}); err != nil {
					t.Fatal(err)
				}
				if len(recs) == 3 && strings.Contains(states(recs), "complete") {
					break
				}
			}
			if len(recs) != 3 {
				t.Fatalf("the store holds %s, want a's two power records and b's boot", states(recs))
			}
			for _, s := range []string{"a", "b"} {
				for _, f := range []Filter{{}, {MAC: macA}, {Limit: 1}, {Since: powerAt.Add(time.Second)}} {
					got, err := hs[s].Boots(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					if d, c := describe(got), causes(got); d != "complete by=b servers= dhcp=3 files=0 nbd=0 done=b" || c != "on api:admin" {
						t.Fatalf("server %s lists %+v: %s (%s), want b's boot with a's power on", s, f, d, c)
					}
					if !got[0].Power.Time.Equal(powerAt) {
						t.Fatalf("server %s: power at %v, want %v", s, got[0].Power.Time, powerAt)
					}
				}
				if got, err := hs[s].Boots(ctx, Filter{MAC: macB}); err != nil || len(got) != 0 {
					t.Fatalf("server %s lists %s, %v for the machine that never booted, want nothing", s, describe(got), err)
				}
				b, ok, err := hs[s].Boot(ctx, bootID(macA, powerAt.Add(7*time.Second))+"-"+serverTag("b"))
				if err != nil || !ok || b.Power == nil || b.Power.Cause != "api:admin" {
					t.Fatalf("server %s: Boot = %+v, %v, %v; want b's boot with a's power on", s, b, ok, err)
				}
			}
			// storm --real reads the listing as GET /boots sends it.
			got, err := hs["b"].Boots(ctx, Filter{Since: powerAt})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var real []storm.RealBoot
			if err := json.Unmarshal(raw, &real); err != nil {
				t.Fatal(err)
			}
			rep := storm.RealReport("lab", powerAt, []storm.Powered{{MAC: macA.String(), At: powerAt}, {MAC: macB.String(), At: powerAt}},
				real, true)
			if m := rep.Machines; m[0].Result != "ok" || m[0].Boot != 28 || m[1].Result != "no boot complete within the timeout" {
				t.Fatalf("storm --real: %+v, want the first machine up 28 s after power-on, the other timed out", m)
			}
		})
	}
}

// TestPowerInALimitedRead: a listing with a limit, after a storm that a
// powered on and b's DHCP answered, finds every listed boot's power
// record, though all of them are older than the records the limit
// reads first; so does a read of one boot, though its power record is
// older than StaleAfter before it.
func TestPowerInALimitedRead(t *testing.T) {
	store := openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
	tf := newTestFleet(Config{Ended: 512, MaxBoots: 1 << 10}, "a", "b")
	mac := func(i int) net.HardwareAddr { return append(macA[:4:4], byte(i>>8), byte(i)) }
	for i := range 200 {
		powered("a", mac(i), "on", "schedule:lab")(tf)
	}
	wait(5 * time.Minute)(tf)
	for i := range 200 {
		heard("b", mac(i), ipxe)(tf)
		tf.add(-time.Second + time.Millisecond)
	}
	var recs []inventory.BootRecord
	for _, b := range tf.stored(t) {
		rec, err := encodeBoot(b)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 400 {
		t.Fatalf("%d records, want 200 power records and 200 boots", len(recs))
	}
	if err := store.PutBoots(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	h := NewHistory(New(Config{Now: tf.time, StaleAfter: time.Minute}), HistoryConfig{Store: store})
	for _, limit := range []int{1, 10, 150} {
		got, err := h.Boots(context.Background(), Filter{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != limit || strings.Count(causes(got), "on schedule:lab") != limit {
			t.Fatalf("limit %d: %d boots with causes %s, want %d, each with the power on", limit, len(got), causes(got), limit)
		}
	}
	id := bootID(mac(7), t0.Add(5*time.Minute+7*time.Millisecond)) + "-" + serverTag("b")
	if b, ok, err := h.Boot(context.Background(), id); err != nil || !ok || b.Power == nil {
		t.Fatalf("Boot(%s) = %s, %v, %v; want the boot with its power on", id, causes([]Boot{b}), ok, err)
	}
}
