package telemetry

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func rootIOQuery(mc, uc, hits, misses, fallbacks uint64, group string) url.Values {
	u := func(v uint64) []string { return []string{strconv.FormatUint(v, 10)} }
	return url.Values{"multicast": u(mc), "unicast": u(uc), "hits": u(hits), "misses": u(misses),
		"written": u(0), "fallbacks": u(fallbacks), "group": {group}}
}

// TestRootIO: a machine's reports land on its latest boot, the last one
// kept, and /metrics adds what each report adds, across machines.
func TestRootIO(t *testing.T) {
	f := newFake(t, Config{})
	f.dora(macA, uefi)
	f.dora(macB, uefi)
	if err := f.r.RootIO(macA, rootIOQuery(100, 10, 500, 110, 0, "on"), "10.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	f.step(5 * time.Second)
	second := rootIOQuery(300, 20, 900, 320, 1, "on")
	second.Set("lost", "7")
	second.Set("repairs", "2")
	second.Set("overflow", "5")
	second.Set("ahead", "40")
	second.Set("ahead_used", "31")
	if err := f.r.RootIO(macA, second, "10.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	if err := f.r.RootIO(macB, rootIOQuery(0, 400, 0, 400, 3, "silent"), "10.0.0.3:1"); err != nil {
		t.Fatal(err)
	}
	bs := f.r.Boots(Filter{MAC: macA})
	if len(bs) != 1 || bs[0].RootIO == nil {
		t.Fatalf("boots of A: %+v, want one with a root-io report", bs)
	}
	if got := *bs[0].RootIO; got.MulticastBytes != 300 || got.UnicastBytes != 20 || got.Fallbacks != 1 || got.Group != "on" || got.Lost != 7 || got.Repairs != 2 || got.Overflow != 5 || got.AheadChunks != 40 || got.AheadUsed != 31 || !got.Time.Equal(f.now) {
		t.Fatalf("A's root io %+v, want the last report", got)
	}
	m := scrape(t, f.r)
	for key, want := range map[string]float64{
		"bootfleet_root_bytes_total,via=multicast":          300,
		"bootfleet_root_bytes_total,via=unicast":            420,
		"bootfleet_root_cache_bytes_total,result=hit":       900,
		"bootfleet_root_cache_bytes_total,result=miss":      720,
		"bootfleet_root_fallbacks_total":                    4,
		"bootfleet_root_groups_given_up_total,state=silent": 1,
		"bootfleet_root_groups_given_up_total,state=lossy":  0,
	} {
		if m[key] != want {
			t.Errorf("%s = %v, want %v", key, m[key], want)
		}
	}
	for _, bad := range []url.Values{
		rootIOQuery(1, 1, 1, 1, 1, "maybe"),
		{"multicast": {"x"}},
		func() url.Values { q := rootIOQuery(1, 1, 1, 1, 1, "on"); q.Set("lost", "-1"); return q }(),
		func() url.Values { q := rootIOQuery(1, 1, 1, 1, 1, "on"); q.Set("overflow", "x"); return q }(),
		func() url.Values { q := rootIOQuery(1, 1, 1, 1, 1, "on"); q.Set("ahead_used", "x"); return q }(),
	} {
		if err := f.r.RootIO(macA, bad, "10.0.0.2:1"); err == nil || !strings.Contains(err.Error(), "root-io report") {
			t.Errorf("report %v: got %v, want refused", bad, err)
		}
	}
}

// FuzzParseRootIO: any query either parses to a report whose counters
// and group survive a round trip, or is refused.
func FuzzParseRootIO(f *testing.F) {
	f.Add("multicast=1&unicast=2&hits=3&misses=4&written=0&fallbacks=5&group=on")
	f.Add("multicast=1&unicast=2&hits=3&misses=4&written=0&fallbacks=5&lost=6&repairs=7&group=lossy")
	f.Add("multicast=1&unicast=2&hits=3&misses=4&written=0&fallbacks=5&lost=6&overflow=2&repairs=7&ahead=9&ahead_used=8&group=on")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		r, err := ParseRootIO(q)
		if err != nil {
			return
		}
		q2 := rootIOQuery(r.MulticastBytes, r.UnicastBytes, r.HitBytes, r.MissBytes, r.Fallbacks, r.Group)
		q2.Set("lost", strconv.FormatUint(r.Lost, 10))
		q2.Set("repairs", strconv.FormatUint(r.Repairs, 10))
		q2.Set("overflow", strconv.FormatUint(r.Overflow, 10))
		q2.Set("ahead", strconv.FormatUint(r.AheadChunks, 10))
		q2.Set("ahead_used", strconv.FormatUint(r.AheadUsed, 10))
		back, err := ParseRootIO(q2)
		back.WrittenBytes = r.WrittenBytes
		if err != nil || back != r {
			t.Fatalf("%q: %+v does not survive a round trip: %+v, %v", raw, r, back, err)
		}
	})
}
