package telemetry

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/postgres"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.PostgresMain(m)) }

// TestPartialRecords: in a fleet, a server that did not answer the
// machine's DHCP still records what it served; outside one it does not.
func TestPartialRecords(t *testing.T) {
	tests := []struct {
		name   string
		server string
		steps  []fleetStep
		want   string // describe of this server's own records
	}{
		{"lone server: a file without a boot is not recorded", "", []fleetStep{sent("a", macA, "vmlinuz")}, ""},
		{"fleet: a file opens a partial record", "a", []fleetStep{sent("a", macA, "vmlinuz"), sent("a", macA, "initrd")},
			"booting by=a servers= dhcp=0 files=2 nbd=0 done="},
		{"fleet: the DoneURL alone", "a", []fleetStep{doneOn("a", macA)}, "complete by=a servers= dhcp=0 files=0 nbd=0 done=a"},
		{"fleet: an NBD session alone", "a", []fleetStep{served("a", macA, time.Minute)},
			"booting by=a servers= dhcp=0 files=0 nbd=1 done="},
		{"fleet: a file after a quiet gap opens a new partial record", "a", []fleetStep{sent("a", macA, "vmlinuz"),
			wait(3 * time.Minute), sent("a", macA, "vmlinuz")},
			"booting by=a servers= dhcp=0 files=1 nbd=0 done= | failed by=a servers= dhcp=0 files=1 nbd=0 done="},
		{"fleet: this server's DHCP closes the partial record", "a", []fleetStep{sent("a", macA, "vmlinuz"), wait(time.Minute),
			heard("a", macA, uefi)},
			"booting by=a servers= dhcp=2 files=0 nbd=0 done= | failed by=a servers= dhcp=0 files=1 nbd=0 done="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFleet(Config{}, "a")
			tf.recs["a"] = New(Config{Server: tt.server, Now: func() time.Time { return tf.time() }})
			for _, s := range tt.steps {
				s(tf)
			}
			got := tf.recs["a"].Boots(Filter{})
			if d := describe(got); d != tt.want {
				t.Fatalf("records:\n got %s\nwant %s", d, tt.want)
			}
			for _, b := range got {
				if b.Partial == (len(b.DHCP) > 0) {
					t.Errorf("boot %s: partial %v with %d DHCP packets", b.ID, b.Partial, len(b.DHCP))
				}
			}
		})
	}
}

// TestQuiet: an open boot that changed is handed to the store once quiet
// for Config.Quiet, or after 6 Quiet if it never pauses, and then not
// again until it changes.
func TestQuiet(t *testing.T) {
	var busy []fleetStep // a file every 4 s for 36 s: never quiet for 5 s
	for range 9 {
		busy = append(busy, sent("a", macA, "k"), wait(2*time.Second))
	}
	tests := []struct {
		name  string
		steps []fleetStep
		want  int // boots quiet returns after the steps
	}{
		{"not yet quiet", []fleetStep{sent("a", macA, "k"), wait(4 * time.Second)}, 0},
		{"quiet", []fleetStep{sent("a", macA, "k"), wait(5 * time.Second)}, 1},
		{"busy for 6 Quiet", busy, 1},
		{"ended boots go through the ended queue", []fleetStep{sent("a", macA, "k"), doneOn("a", macA), wait(time.Minute)}, 0},
		{"two machines", []fleetStep{heard("a", macA, ipxe), heard("a", macB, ipxe), wait(time.Minute)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFleet(Config{Quiet: 5 * time.Second}, "a")
			for _, s := range tt.steps {
				s(tf)
			}
			if got := tf.recs["a"].quiet(); len(got) != tt.want {
				t.Fatalf("quiet returned %d boots, want %d", len(got), tt.want)
			}
			tf.add(time.Hour / 2)
			if got := tf.recs["a"].quiet(); tt.want > 0 && len(got) != 0 {
				t.Fatalf("quiet returned %d boots again with no change since", len(got))
			}
		})
	}
}

// TestFleetHistory: two servers on one store, one answering DHCP and one
// serving the files and taking the DoneURL, each read the machine's boot
// as one record, within seconds of the events and before the boot ends.
func TestFleetHistory(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			store := st.open(t)
			tf, hs := runFleet(t, store)
			ctx := context.Background()
			// stored waits (boundedly) until the store holds n records,
			// one of them in state state if it is not "".
			stored := func(n int, state string) {
				t.Helper()
				var recs []inventory.BootRecord
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					var err error
					if recs, err = store.ListBoots(ctx, inventory.BootFilter{}); err != nil {
						t.Fatal(err)
					}
					if len(recs) == n && (state == "" || strings.Contains(states(recs), state)) {
						return
					}
				}
				t.Fatalf("the store holds %d records (%s), want %d", len(recs), states(recs), n)
			}
			// one reads the boot through both servers' histories and
			// checks it is one boot with the events so far.
			one := func(want string) {
				t.Helper()
				for _, s := range []string{"a", "b"} {
					got, err := hs[s].Boots(ctx, Filter{MAC: macA})
					if err != nil {
						t.Fatal(err)
					}
					if d := describe(got); d != want {
						t.Fatalf("server %s lists:\n got %s\nwant %s", s, d, want)
					}
					for _, id := range got[0].Parts {
						b, ok, err := hs[s].Boot(ctx, id)
						if err != nil || !ok || b.ID != got[0].ID || describe([]Boot{b}) != want {
							t.Fatalf("server %s: Boot(%s) = %s, %v, %v; want boot %s: %s", s, id, describe([]Boot{b}), ok, err,
								got[0].ID, want)
						}
					}
				}
			}
			heard("a", macA, ipxe)(tf)
			answered("a", macA)(tf)
			sent("b", macA, "vmlinuz")(tf)
			wait(5 * time.Second)(tf) // quiet: both open records reach the store
			stored(2, "")
			one("booting by=a servers=a,b dhcp=3 files=1 nbd=0 done=")
			// More on b after its record was stored: written again, by ID.
			sent("b", macA, "initrd")(tf)
			wait(5 * time.Second)(tf)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if got, _ := hs["a"].Boots(ctx, Filter{}); len(got) == 1 && len(got[0].Transfers) == 2 {
					break
				}
			}
			one("booting by=a servers=a,b dhcp=3 files=2 nbd=0 done=")
			doneOn("b", macA)(tf)
			stored(2, "complete")
			one("complete by=a servers=a,b dhcp=3 files=2 nbd=0 done=b")
		})
	}
}

// runFleet runs servers a and b, each with its History, on store.
func runFleet(t *testing.T, store inventory.Store) (*testFleet, map[string]*History) {
	tf := newTestFleet(Config{Ended: 64, Quiet: 5 * time.Second}, "a", "b")
	hs := map[string]*History{}
	for _, s := range []string{"a", "b"} {
		hs[s] = NewHistory(tf.recs[s], HistoryConfig{Store: store, Flush: 5 * time.Millisecond})
		runHistory(t, hs[s])
	}
	return tf, hs
}

// sharedStores are the stores a fleet shares, each opened fresh.
var sharedStores = []struct {
	name string
	open func(t *testing.T) inventory.Store
}{
	{"sqlite", func(t *testing.T) inventory.Store {
		return openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
	}},
	{"postgres", func(t *testing.T) inventory.Store {
		s, err := postgres.Open(context.Background(), testutil.FreshPostgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

func states(recs []inventory.BootRecord) string {
	var s []string
	for _, r := range recs {
		s = append(s, r.ID+" "+r.State)
	}
	return strings.Join(s, ", ")
}

// The tag keeps two servers' records of one DISCOVER apart in the store.
func TestServerTag(t *testing.T) {
	tf := newTestFleet(Config{}, "a", "b")
	for _, s := range []string{"a", "b"} {
		tf.recs[s].DHCPPacket(macA, dhcpv4.MessageTypeDiscover, ipxe)
	}
	a, b := tf.recs["a"].Boots(Filter{})[0].ID, tf.recs["b"].Boots(Filter{})[0].ID
	if a == b || !strings.HasPrefix(a, bootID(macA, t0)+"-") || !strings.HasPrefix(b, bootID(macA, t0)+"-") {
		t.Fatalf("IDs %s and %s: want two, each %s and its server's tag", a, b, bootID(macA, t0))
	}
	if serverTag("a") != serverTag("a") {
		t.Fatal("serverTag is not stable")
	}
}

// TestFleetMetrics: a fleet member counts in /metrics the boots its DHCP
// started and the DoneURLs it took, but not a boot it saw go stale or
// start over (its DoneURL may have gone to another server), nor the
// partial records it opened.
func TestFleetMetrics(t *testing.T) {
	tests := []struct {
		name                       string
		server                     string
		steps                      []fleetStep
		started, completed, failed float64
		durations                  float64
	}{
		{"lone server: a stale boot failed", "", []fleetStep{heard("a", macA, ipxe), wait(2 * time.Hour),
			func(tf *testFleet) { tf.recs["a"].Sweep() }}, 1, 0, 1, 0},
		{"fleet: a stale boot is not counted", "a", []fleetStep{heard("a", macA, ipxe), wait(2 * time.Hour),
			func(tf *testFleet) { tf.recs["a"].Sweep() }}, 1, 0, 0, 0},
		{"fleet: a restart is not counted", "a", []fleetStep{heard("a", macA, ipxe), sent("a", macA, "k"),
			heard("a", macA, ipxe)}, 2, 0, 0, 0},
		{"fleet: a reported failure is", "a", []fleetStep{sent("a", macA, "k"), reported("a", macA, "failed-kernel")}, 0, 0, 1, 0},
		{"fleet: a DoneURL without DHCP here counts, its duration does not", "a", []fleetStep{sent("a", macA, "k"),
			doneOn("a", macA)}, 0, 1, 0, 0},
		{"fleet: a whole boot here", "a", []fleetStep{heard("a", macA, ipxe), doneOn("a", macA)}, 1, 1, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tf := newTestFleet(Config{}, "a")
			tf.recs["a"] = New(Config{Server: tt.server, Now: tf.time})
			for _, s := range tt.steps {
				s(tf)
			}
			m := scrape(t, tf.recs["a"])
			got := []float64{m["bootfleet_boots_started_total"], m["bootfleet_boots_completed_total"],
				m["bootfleet_boots_failed_total"], m["bootfleet_boot_duration_seconds,count"]}
			if want := []float64{tt.started, tt.completed, tt.failed, tt.durations}; !slices.Equal(got, want) {
				t.Fatalf("started, completed, failed, durations = %v, want %v", got, want)
			}
		})
	}
}

// TestHistoryLimitInAStorm: a listing with a limit, while many machines
// boot within the same second, returns the newest boots up to the limit,
// each whole, from one server's records or a fleet's.
func TestHistoryLimitInAStorm(t *testing.T) {
	tests := []struct {
		name    string
		servers []string
		parts   int // records per boot
	}{
		{"one server", []string{""}, 1},
		{"dhcp on a, files on b", []string{"a", "b"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t, filepath.Join(t.TempDir(), sqlite.FileName))
			tf := newTestFleet(Config{MaxBoots: 1 << 10}, "a", "b")
			for _, s := range tt.servers {
				tf.recs[s] = New(Config{Server: s, Now: tf.time, MaxBoots: 1 << 10})
			}
			file := tt.servers[len(tt.servers)-1]
			for i := range 200 { // 200 machines within 0.2 s
				mac := append(macA[:4:4], byte(i>>8), byte(i))
				heard(tt.servers[0], mac, ipxe)(tf)
				sent(file, mac, "vmlinuz")(tf)
				tf.add(-3*time.Second + time.Millisecond)
			}
			var recs []inventory.BootRecord
			for _, b := range tf.records() {
				rec, err := encodeBoot(b)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec)
			}
			if err := store.PutBoots(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
			h := NewHistory(New(Config{Now: tf.time}), HistoryConfig{Store: store})
			for _, limit := range []int{1, 10, 150} {
				got, err := h.Boots(context.Background(), Filter{Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != limit {
					t.Fatalf("limit %d: %d boots", limit, len(got))
				}
				for i, b := range got {
					if max(len(b.Parts), 1) != tt.parts || i > 0 && b.Start.After(got[i-1].Start) {
						t.Fatalf("limit %d: boot %d of %d parts, start %v; want %d parts, newest first", limit, i, len(b.Parts), b.Start, tt.parts)
					}
				}
			}
		})
	}
}

// TestDoneURLOnAnotherServer: in a fleet, the DoneURL of a boot whose DHCP
// went to another server completes this server's part, but gives no
// duration: the part starts mid-boot, at the first file this server sent.
func TestDoneURLOnAnotherServer(t *testing.T) {
	f := newFake(t, Config{Server: "b"})
	f.http(macA, "10.0.0.10", "vmlinuz", 1<<20, time.Second)
	f.step(20 * time.Second)
	if took, ok := f.done(macA); ok {
		t.Fatalf("DoneURL of a partial record: took %v, want no duration", took)
	}
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 || !bs[0].Partial || bs[0].State != StateComplete || bs[0].DoneServer != "b" {
		t.Fatalf("boots %+v, want one partial record, complete, done on b", bs)
	}
}
