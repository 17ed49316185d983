package dhcp

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Decline holds are kept in a file (Config.HoldFile) as well as in
// memory: an address a client DECLINEd is answering ARP for some other
// host, and a server that restarts within declineHold must not offer it
// again to the next machine, which would decline it too (or worse, not
// check and clash). The file is rewritten whole, atomically, when a hold
// is added or moves later by more than holdSlack; declines are rare, and
// the slack keeps a client that declines in a loop from costing an fsync
// per packet.

// holdSlack is how much later a repeated DECLINE must push a hold before
// the file is rewritten; after a restart the hold may end this much early.
const holdSlack = time.Minute

// holdFileVersion is the version of the file format; a later release
// that changes it reads this one too.
const holdFileVersion = 1

type holdFile struct {
	Version int        `json:"version"`
	Holds   []holdJSON `json:"holds"`
}

type holdJSON struct {
	IP    string    `json:"ip"`
	Until time.Time `json:"until"`
}

// encodeHolds is the file's content for holds, ordered by address so the
// file diffs well.
func encodeHolds(holds map[uint32]time.Time) ([]byte, error) {
	f := holdFile{Version: holdFileVersion, Holds: []holdJSON{}}
	us := make([]uint32, 0, len(holds))
	for u := range holds {
		us = append(us, u)
	}
	sort.Slice(us, func(i, j int) bool { return us[i] < us[j] })
	for _, u := range us {
		f.Holds = append(f.Holds, holdJSON{IP: u2ip(u).String(), Until: holds[u].UTC()})
	}
	return json.MarshalIndent(f, "", "  ")
}

// decodeHolds reads a hold file's content.
func decodeHolds(b []byte) (map[uint32]time.Time, error) {
	var f holdFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("want a JSON hold file: %w", err)
	}
	if f.Version != holdFileVersion {
		return nil, fmt.Errorf("want version %d, got %d", holdFileVersion, f.Version)
	}
	out := make(map[uint32]time.Time, len(f.Holds))
	for i, h := range f.Holds {
		ip := net.ParseIP(h.IP).To4()
		if ip == nil || h.Until.IsZero() {
			return nil, fmt.Errorf("holds[%d]: want an IPv4 address and a time, got %q and %v", i, h.IP, h.Until)
		}
		out[ip2u(ip)] = h.Until
	}
	return out, nil
}

// holdWriter writes hold snapshots in the order they were taken: two
// DECLINEs at once must not leave the older set on disk.
type holdWriter struct {
	path string
	mu   sync.Mutex
	gen  uint64 // of the snapshot on disk
}

func (w *holdWriter) write(gen uint64, holds map[uint32]time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen <= w.gen {
		return nil // a newer snapshot is on disk already
	}
	b, err := encodeHolds(holds)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(w.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save decline holds: %w", err)
	}
	w.gen = gen
	return nil
}

// loadHolds restores the holds of a previous run that are inside the
// range; expired ones go at the next gc.
func (a *allocator) loadHolds() (int, error) {
	if a.holds == nil {
		return 0, nil
	}
	b, err := os.ReadFile(a.holds.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read decline holds: %w", err)
	}
	holds, err := decodeHolds(b)
	if err != nil {
		return 0, fmt.Errorf("decline holds %s: %w (delete the file to drop them)", a.holds.path, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for u, until := range holds {
		if u < a.start || u > a.end {
			continue
		}
		a.declined[u] = until
		heap.Push(&a.pool.timers, timer{at: until, u: u})
		n++
	}
	return n, nil
}

// snapshotHolds returns a copy of the holds to write, or nil when the
// change at u does not need a write. Call with mu held.
func (a *allocator) snapshotHolds(u uint32, old, until time.Time) (uint64, map[uint32]time.Time) {
	if a.holds == nil || (!old.IsZero() && until.Sub(old) < holdSlack) {
		return 0, nil
	}
	a.holdGen++
	out := make(map[uint32]time.Time, len(a.declined))
	for v, t := range a.declined {
		out[v] = t
	}
	return a.holdGen, out
}
