package dhcplb

import (
	"fmt"
	"testing"
)

func testMACs(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte{0x52, 0x54, 0x00, 0x10, byte(i >> 8), byte(i)}
	}
	return out
}

// views builds each live server's own Assignment of the same table.
func views(members []Member, wait uint16) map[string]*Assignment {
	out := map[string]*Assignment{}
	for _, m := range members {
		if !m.Live {
			continue
		}
		var others []Member
		for _, o := range members {
			if o.Name != m.Name {
				others = append(others, o)
			}
		}
		out[m.Name] = Assign(m.Name, others, wait)
	}
	return out
}

func TestDecideOneAnswer(t *testing.T) {
	tests := []struct {
		name    string
		members []Member
		secs    uint16
		// wantAnswers is how many servers answer each client.
		wantAnswers int
		// wantReasons counts, over all clients, the answers by reason.
		wantReasons []Reason
	}{
		{"alone", []Member{{"a", true}}, 0, 1, []Reason{Alone}},
		{"three live", []Member{{"a", true}, {"b", true}, {"c", true}}, 0, 1, []Reason{Own}},
		{"one stale", []Member{{"a", true}, {"b", true}, {"c", false}}, 0, 1, []Reason{Own, CoverStale}},
		{"two stale", []Member{{"a", false}, {"b", true}, {"c", false}}, 0, 1, []Reason{Own, CoverStale}},
		{"waited below the threshold", []Member{{"a", true}, {"b", true}, {"c", true}}, 2, 1, []Reason{Own}},
		{"waited", []Member{{"a", true}, {"b", true}, {"c", true}}, 3, 2, []Reason{Own, CoverWaited}},
		{"waited twice as long", []Member{{"a", true}, {"b", true}, {"c", true}}, 7, 2, []Reason{Own, CoverWaited}},
		{"waited, one stale", []Member{{"a", true}, {"b", true}, {"c", false}}, 3, 2, []Reason{Own, CoverStale, CoverWaited}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fleets := views(tt.members, 3)
			reasons := map[Reason]int{}
			for _, hw := range testMACs(2000) {
				n := 0
				for _, f := range fleets {
					if d := f.Decide(hw, tt.secs); d.Answer {
						n++
						reasons[d.Reason]++
					}
				}
				if n != tt.wantAnswers {
					t.Fatalf("client %x: %d servers answer, want %d", hw, n, tt.wantAnswers)
				}
			}
			for _, r := range tt.wantReasons {
				if reasons[r] == 0 {
					t.Errorf("no client answered for reason %q; got %v", r, reasons)
				}
			}
			if len(reasons) != len(tt.wantReasons) {
				t.Errorf("answers by reason %v, want only %v", reasons, tt.wantReasons)
			}
		})
	}
}

// TestDecideShares: three servers each own about a third of the clients,
// and a server going stale moves only its own clients.
func TestDecideShares(t *testing.T) {
	all := views([]Member{{"a", true}, {"b", true}, {"c", true}}, 3)
	cStale := views([]Member{{"a", true}, {"b", true}, {"c", false}}, 3)
	cGone := views([]Member{{"a", true}, {"b", true}}, 3)
	share := map[string]int{}
	macs := testMACs(3000)
	for _, hw := range macs {
		var owner string
		for name, f := range all {
			if f.Decide(hw, 0).Answer {
				owner = name
			}
		}
		share[owner]++
		for name, f := range cStale {
			d := f.Decide(hw, 0)
			if owner != "c" && d.Answer != (name == owner) {
				t.Fatalf("client %x of %s: with c stale, %s answers=%v; a stale server must move only its own clients", hw, owner, name, d.Answer)
			}
			if d.Owner != owner {
				t.Fatalf("client %x: owner %q with c stale, want %q (a stale server keeps its buckets)", hw, d.Owner, owner)
			}
		}
		// Gone from the table (stopped cleanly): its clients are the
		// others' own, and nobody else's move.
		for name, f := range cGone {
			if d := f.Decide(hw, 0); owner != "c" && d.Answer != (name == owner) {
				t.Fatalf("client %x of %s: with c gone, %s answers=%v", hw, owner, name, d.Answer)
			}
		}
	}
	for name, n := range share {
		if n < len(macs)/5 || n > len(macs)/2 {
			t.Errorf("server %s owns %d of %d clients, want about a third; shares %v", name, n, len(macs), share)
		}
	}
}

// TestDecideSameEverywhere: the order in which a server lists its peers
// does not change any owner.
func TestDecideSameEverywhere(t *testing.T) {
	f1 := Assign("a", []Member{{"b", true}, {"c", true}, {"d", false}}, 3)
	f2 := Assign("a", []Member{{"d", false}, {"c", true}, {"b", true}, {"b", true}}, 3)
	for _, hw := range testMACs(500) {
		if d1, d2 := f1.Decide(hw, 0), f2.Decide(hw, 0); d1 != d2 {
			t.Fatalf("client %x: %+v and %+v from the same fleet listed in another order", hw, d1, d2)
		}
	}
}

// TestDecideWaitedCycles: each further multiple of the threshold hands
// the client to the next server in line, so all of them are tried.
func TestDecideWaitedCycles(t *testing.T) {
	members := []Member{{"a", true}, {"b", true}, {"c", true}, {"d", true}}
	fleets := views(members, 3)
	hw := testMACs(1)[0]
	covers := map[string]bool{}
	var owner string
	for _, secs := range []uint16{3, 6, 9, 12} {
		for name, f := range fleets {
			d := f.Decide(hw, secs)
			owner = d.Owner
			if d.Reason == CoverWaited {
				covers[name] = true
			}
		}
	}
	if len(covers) != 3 || covers[owner] {
		t.Fatalf("covers over 3..12 s: %v (owner %s), want the three others", covers, owner)
	}
	if d := Assign("a", []Member{{"b", true}}, 0).Decide(hw, 60000); d.Reason == CoverWaited {
		t.Fatalf("wait 0 must turn the cover off, got %+v", d)
	}
}

func TestSlot(t *testing.T) {
	tests := []struct {
		self    string
		others  []Member
		i, n    int
		isAlone bool
	}{
		{"a", nil, 0, 1, true},
		{"b", []Member{{"a", true}, {"c", true}}, 1, 3, false},
		{"c", []Member{{"a", true}, {"b", false}}, 1, 2, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.self, tt.others), func(t *testing.T) {
			f := Assign(tt.self, tt.others, 3)
			if i, n := f.Slot(); i != tt.i || n != tt.n || f.Alone() != tt.isAlone {
				t.Fatalf("Slot() = %d, %d, Alone %v; want %d, %d, %v", i, n, f.Alone(), tt.i, tt.n, tt.isAlone)
			}
		})
	}
}
