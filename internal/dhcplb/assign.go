package dhcplb

import (
	"cmp"
	"hash/fnv"
	"slices"
)

// Member is one other server answering DHCP on this LAN, as the fleet's
// servers table shows it.
type Member struct {
	Name string
	Live bool // false: stale, no heartbeat for inventory.StaleAfter
}

// Reason says why a server answers a client or stays silent.
type Reason int

// The reasons of a Decision.
const (
	// Alone: no other server answers DHCP on this LAN; answer everyone.
	Alone Reason = iota
	// Own: the client's bucket is this server's.
	Own
	// CoverStale: the bucket's server is stale, and this server is the
	// live one next in line for the bucket.
	CoverStale
	// CoverWaited: the client's secs field says it has waited, and this
	// server is the one in line for that long a wait.
	CoverWaited
	// Peer: another server answers this client.
	Peer
)

// String names the reason for log lines.
func (r Reason) String() string {
	switch r {
	case Alone:
		return "alone"
	case Own:
		return "own bucket"
	case CoverStale:
		return "covering for a stale server"
	case CoverWaited:
		return "covering for a client that waited"
	}
	return "another server's bucket"
}

// Decision is whether this server answers a client, and why.
type Decision struct {
	Answer bool
	Reason Reason
	Bucket uint8
	Owner  string // the bucket's server, live or stale; empty when Alone
}

// Assignment is the assignment of buckets to the servers of one LAN at
// one moment, as one of them sees it. Every server that reads the same
// table computes the same owners. Build it with Assign; it is never
// changed afterwards, so the packet path reads it without a lock.
type Assignment struct {
	self  string
	wait  uint16 // secs from which a client counts as having waited; 0: never
	alone bool
	// owner is each bucket's server among all members, live or stale.
	owner [Buckets]string
	// ranked lists, for each bucket, the live servers best first: the
	// owner when it is live, then the order in which others cover.
	ranked     [Buckets][]string
	slot, size int // this server's place among the live ones by name
}

// Assign computes the assignment for server self, live by definition
// (it is the one asking), and the other servers answering DHCP on its
// LAN. waitSecs is the secs value from which a client counts as having
// waited for its server; 0 turns that cover off.
//
// Each bucket goes to the server with the highest hash of (name,
// bucket) (rendezvous hashing): every server gets about the same share,
// and when one goes stale or joins only its own buckets move, so the
// clients of the others keep their server.
func Assign(self string, others []Member, waitSecs uint16) *Assignment {
	a := &Assignment{self: self, wait: waitSecs, size: 1}
	all := []Member{{Name: self, Live: true}}
	for _, m := range others {
		if m.Name != self && !slices.ContainsFunc(all, func(o Member) bool { return o.Name == m.Name }) {
			all = append(all, m)
		}
	}
	if len(all) == 1 {
		a.alone = true
		return a
	}
	slices.SortFunc(all, func(x, y Member) int { return cmp.Compare(x.Name, y.Name) })
	var live []string
	for _, m := range all {
		if m.Live {
			live = append(live, m.Name)
		}
	}
	a.slot, a.size = slices.Index(live, self), len(live)
	for b := range Buckets {
		byWeight := func(x, y string) int {
			if d := cmp.Compare(weight(y, b), weight(x, b)); d != 0 {
				return d
			}
			return cmp.Compare(x, y)
		}
		best := all[0].Name
		for _, m := range all[1:] {
			if byWeight(m.Name, best) < 0 {
				best = m.Name
			}
		}
		a.owner[b] = best
		a.ranked[b] = slices.SortedFunc(slices.Values(live), byWeight)
	}
	return a
}

// weight is name's rendezvous weight for bucket b: FNV-1a of the name,
// then the bucket mixed in with SplitMix64's finalizer, since FNV alone
// orders names that differ in one letter the same way for every bucket.
func weight(name string, b int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	x := h.Sum64() ^ (uint64(b)+1)*0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// WaitSecs is the secs value from which a client counts as having
// waited for its server; 0: never.
func (a *Assignment) WaitSecs() uint16 { return a.wait }

// Alone reports whether no other server answers DHCP on this LAN.
func (a *Assignment) Alone() bool { return a.alone }

// Slot returns this server's place among the live servers ordered by
// name, and how many there are; (0, 1) when alone. Servers use it to
// start their search for a free address in different parts of the
// range, so that two of them rarely offer the same one.
func (a *Assignment) Slot() (i, n int) { return a.slot, a.size }

// Decide says whether this server answers a client with hardware
// address hw whose request carries secs (RFC 2131's seconds since the
// client began). The owner of the client's bucket answers. When the
// owner is stale the first live server in the bucket's ranking covers
// it. When secs reaches the wait threshold one more server answers
// besides the owner: the next in the ranking, and for each further
// multiple of the threshold the one after, so a client whose owner died
// before it went stale still finds, one by one, a server that answers.
func (a *Assignment) Decide(hw []byte, secs uint16) Decision {
	if a.alone {
		return Decision{Answer: true, Reason: Alone}
	}
	b := Bucket(hw)
	d := Decision{Bucket: b, Owner: a.owner[b], Reason: Peer}
	ranked := a.ranked[b]
	switch {
	case d.Owner == a.self:
		d.Answer, d.Reason = true, Own
	case ranked[0] == a.self && ranked[0] != d.Owner:
		d.Answer, d.Reason = true, CoverStale
	case a.wait > 0 && secs >= a.wait && len(ranked) > 1:
		k := int(secs/a.wait) - 1
		if ranked[1+k%(len(ranked)-1)] == a.self {
			d.Answer, d.Reason = true, CoverWaited
		}
	}
	return d
}
