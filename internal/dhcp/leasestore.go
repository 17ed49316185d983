package dhcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/durable"
)

// Lease binds an address to a MAC until Expiry.
type Lease struct {
	MAC    net.HardwareAddr
	IP     net.IP
	Expiry time.Time
	// Replaces, on a Put, is the expired lease of another MAC on IP that
	// this one takes over, as the allocator last saw it; nil otherwise.
	Replaces *Lease
}

// TakenError is what a LeaseStore shared by several servers returns from
// Put when another MAC holds the address: another server leased it.
// Holder is that lease, so the allocator learns it at once.
type TakenError struct {
	Holder Lease
}

func (e *TakenError) Error() string {
	return fmt.Sprintf("address %v is leased to %v until %s (by another server)", e.Holder.IP, e.Holder.MAC, e.Holder.Expiry.UTC().Format(time.RFC3339))
}

// LeaseStore persists leases. The allocator calls Put before it sends an ACK,
// so a lease the client holds is always on disk. A serving bootfleet keeps
// them in the inventory (inventorysvc.Leases); NewFileStore is the
// stand-alone choice.
type LeaseStore interface {
	// Load returns every stored lease, expired ones included (so a returning
	// machine can get its old address back).
	Load(ctx context.Context) ([]Lease, error)
	// Put inserts or replaces the lease for l.MAC, durably, before
	// returning, and drops l.Replaces. A store that several servers
	// share must refuse, with a *TakenError, a lease whose address
	// another MAC holds unless l.Replaces names that lease as it still
	// is, and do the check and the write as one step. The file and
	// memory stores serve one server, whose allocator never asks for a
	// taken address: they drop l.Replaces's MAC's lease if it is still
	// on l.IP, and check nothing more.
	Put(ctx context.Context, l Lease) error
	// Delete removes the lease for mac; deleting a missing lease is not an error.
	Delete(ctx context.Context, mac net.HardwareAddr) error
}

// NewFileStore returns a LeaseStore that keeps all leases in one JSON file,
// rewritten atomically (temp file, fsync, rename, directory fsync) on every
// change. That is fine for the few hundred machines of a boot LAN.
func NewFileStore(path string) LeaseStore {
	return &fileStore{path: path, leases: map[string]Lease{}}
}

type fileStore struct {
	path   string
	mu     sync.Mutex
	loaded bool
	leases map[string]Lease // by MAC string
}

// leaseFile is the on-disk format; version lets a later release migrate it.
type leaseFile struct {
	Version int         `json:"version"`
	Leases  []leaseJSON `json:"leases"`
}

type leaseJSON struct {
	MAC    string    `json:"mac"`
	IP     string    `json:"ip"`
	Expiry time.Time `json:"expiry"`
}

func (s *fileStore) Load(_ context.Context) ([]Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = true
	s.leases = map[string]Lease{}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease file: %w", err)
	}
	var f leaseFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("lease file %s is not valid JSON (%w); fix or remove it (machines then get new addresses)", s.path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("lease file %s has version %d, want 1; it was written by a different bootfleet release", s.path, f.Version)
	}
	out := make([]Lease, 0, len(f.Leases))
	for i, l := range f.Leases {
		mac, err := net.ParseMAC(l.MAC)
		ip := net.ParseIP(l.IP).To4()
		if err != nil || ip == nil {
			return nil, fmt.Errorf("lease file %s: lease %d has mac %q ip %q, want a MAC and an IPv4 address; fix or remove that entry", s.path, i, l.MAC, l.IP)
		}
		le := Lease{MAC: mac, IP: ip, Expiry: l.Expiry}
		s.leases[mac.String()] = le
		out = append(out, le)
	}
	return out, nil
}

func (s *fileStore) Put(_ context.Context, l Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded {
		return errors.New("lease store used before Load")
	}
	old, had := s.leases[l.MAC.String()]
	gone, replaced := takeOver(s.leases, l)
	l.Replaces = nil
	s.leases[l.MAC.String()] = l
	if err := s.write(); err != nil {
		if had {
			s.leases[l.MAC.String()] = old
		} else {
			delete(s.leases, l.MAC.String())
		}
		if replaced {
			s.leases[gone.MAC.String()] = gone
		}
		return err
	}
	return nil
}

// takeOver drops from leases (by MAC string) the lease l.Replaces names
// if it is still on l.IP, and returns what it dropped.
func takeOver(leases map[string]Lease, l Lease) (Lease, bool) {
	if l.Replaces == nil {
		return Lease{}, false
	}
	key := l.Replaces.MAC.String()
	old, ok := leases[key]
	if !ok || !old.IP.Equal(l.IP) || key == l.MAC.String() {
		return Lease{}, false
	}
	delete(leases, key)
	return old, true
}

func (s *fileStore) Delete(_ context.Context, mac net.HardwareAddr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.leases[mac.String()]
	if !had {
		return nil
	}
	delete(s.leases, mac.String())
	if err := s.write(); err != nil {
		s.leases[mac.String()] = old
		return err
	}
	return nil
}

// write replaces the file so that a crash at any point leaves either the old
// or the new file, never a torn one.
func (s *fileStore) write() error {
	f := leaseFile{Version: 1, Leases: make([]leaseJSON, 0, len(s.leases))}
	for _, l := range s.leases {
		f.Leases = append(f.Leases, leaseJSON{MAC: l.MAC.String(), IP: l.IP.String(), Expiry: l.Expiry.UTC()})
	}
	sort.Slice(f.Leases, func(i, j int) bool { return f.Leases[i].MAC < f.Leases[j].MAC })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("lease file: %w; make sure the data directory %s exists and is writable", err, filepath.Dir(s.path))
	}
	return nil
}

// memStore keeps leases in memory only.
type memStore struct {
	mu     sync.Mutex
	leases map[string]Lease
}

// NewMemStore returns a LeaseStore that forgets everything on restart; for
// tests and for setups that accept that risk.
func NewMemStore() LeaseStore { return &memStore{leases: map[string]Lease{}} }

func (m *memStore) Load(context.Context) ([]Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lease, 0, len(m.leases))
	for _, l := range m.leases {
		out = append(out, l)
	}
	return out, nil
}

func (m *memStore) Put(_ context.Context, l Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	takeOver(m.leases, l)
	l.Replaces = nil
	m.leases[l.MAC.String()] = l
	return nil
}

func (m *memStore) Delete(_ context.Context, mac net.HardwareAddr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leases, mac.String())
	return nil
}
