package identitysvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Store is what the service needs of the inventory.
type Store interface {
	GetMachine(ctx context.Context, mac net.HardwareAddr) (inventory.Machine, error)
	ListMachines(ctx context.Context, f inventory.MachineFilter) ([]inventory.Machine, error)
	GetProfile(ctx context.Context, name string) (inventory.Profile, error)
	inventory.HostKeyStore
}

// Config configures a Service.
type Config struct {
	Store Store // required
	// Sealer holds the fleet's identity key; nil when the server has none,
	// and then NoKey says why: host keys are neither made nor served.
	Sealer *Sealer
	NoKey  error
	// Files renders the files the config gives profiles and machines;
	// nil for none. The files set through the API come from Store.
	Files *Templates
	// Profile says which profile a machine boots, for its files; nil:
	// the machine's own.
	Profile func(net.HardwareAddr) string
	Logger  *slog.Logger // default: discard
}

// Service makes and serves machines' identities.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("identitysvc: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sealer == nil && cfg.NoKey == nil {
		cfg.NoKey = ErrNoKey
	}
	return &Service{cfg: cfg, log: cfg.Logger}, nil
}

// Request says what a boot asks for.
type Request struct {
	MAC net.HardwareAddr
	// Address is where the machine asks from, for templates of machines
	// without a reserved address.
	Address net.IP
	// HostKeys is true when the root has sshd: the machine gets its keys,
	// made now if it has none yet.
	HostKeys bool
}

// Identity is mac's identity for this boot. A machine the inventory does
// not hold gets only the files its profile renders (no name, no
// machine-id, no keys: there is nowhere to keep them).
func (s *Service) Identity(ctx context.Context, req Request) (identity.Identity, error) {
	m, err := s.cfg.Store.GetMachine(ctx, req.MAC)
	known := err == nil
	if err != nil && !errors.Is(err, inventory.ErrNotFound) {
		return identity.Identity{}, err
	}
	if !known {
		m = inventory.Machine{MAC: req.MAC}
	}
	id := identity.Identity{HostName: m.Name, MachineID: m.MachineID}
	if req.HostKeys && known {
		if id.HostKeys, err = s.hostKeys(ctx, m); err != nil {
			return identity.Identity{}, err
		}
	}
	if id.Files, err = s.files(ctx, m, req.Address); err != nil {
		return identity.Identity{}, err
	}
	if err := id.Check(); err != nil {
		return identity.Identity{}, fmt.Errorf("identity of %s: %w", m, err)
	}
	return id, nil
}

// Files is what mac's next boot would get in files, rendered now without
// booting it: `bootfleet machine render`. The address is the reserved
// one, else the one it last booted from.
func (s *Service) Files(ctx context.Context, mac net.HardwareAddr) ([]identity.File, error) {
	m, err := s.cfg.Store.GetMachine(ctx, mac)
	if err != nil {
		return nil, err
	}
	return s.files(ctx, m, m.LastAddress)
}

// hostKeys returns m's keys, making and storing them first if it has
// none. When two servers make them at once the store keeps the first, and
// both hand out that one.
func (s *Service) hostKeys(ctx context.Context, m inventory.Machine) ([]identity.HostKey, error) {
	if s.cfg.Sealer == nil {
		return nil, s.cfg.NoKey
	}
	stored, err := s.cfg.Store.HostKeys(ctx, m.MAC)
	if errors.Is(err, inventory.ErrNotFound) {
		stored, err = s.makeKeys(ctx, m, false)
	}
	if err != nil {
		return nil, err
	}
	return s.open(stored)
}

// makeKeys makes m's keys and stores them, replacing any (a rekey) or
// not (the first boot).
func (s *Service) makeKeys(ctx context.Context, m inventory.Machine, replace bool) (inventory.HostKeys, error) {
	keys, err := NewHostKeys(comment(m))
	if err != nil {
		return inventory.HostKeys{}, err
	}
	plain, err := json.Marshal(keys)
	if err != nil {
		return inventory.HostKeys{}, err
	}
	k := inventory.HostKeys{MAC: m.MAC, Sealed: s.cfg.Sealer.Seal(m.MAC, plain), KeyID: s.cfg.Sealer.ID()}
	for _, hk := range keys {
		k.Public = append(k.Public, hk.Public)
	}
	stored, err := s.cfg.Store.PutHostKeys(ctx, k, replace)
	if err != nil {
		return stored, err
	}
	s.log.Info("ssh host keys made", "mac", m.MAC.String(), "name", m.Name, "fingerprints", fingerprints(stored.Public), "rekey", replace)
	return stored, nil
}

func (s *Service) open(k inventory.HostKeys) ([]identity.HostKey, error) {
	if k.KeyID != s.cfg.Sealer.ID() {
		return nil, fmt.Errorf("%w: the host keys of %s were sealed with identity key %s, this server has %s; give every server of the fleet the same identity.key_file", ErrNoKey, k.MAC, k.KeyID, s.cfg.Sealer.ID())
	}
	plain, err := s.cfg.Sealer.Open(k.MAC, k.Sealed)
	if err != nil {
		return nil, err
	}
	var keys []identity.HostKey
	if err := json.Unmarshal(plain, &keys); err != nil {
		return nil, fmt.Errorf("identity: sealed keys of %s do not hold host keys: %w", k.MAC, err)
	}
	return keys, nil
}

// Rekey makes new host keys for mac, replacing its old ones, and returns
// their fingerprints. Its next boot installs them.
func (s *Service) Rekey(ctx context.Context, mac net.HardwareAddr) ([]string, error) {
	if s.cfg.Sealer == nil {
		return nil, s.cfg.NoKey
	}
	m, err := s.cfg.Store.GetMachine(ctx, mac)
	if err != nil {
		return nil, err
	}
	k, err := s.makeKeys(ctx, m, true)
	if err != nil {
		return nil, err
	}
	return fingerprints(k.Public), nil
}

func comment(m inventory.Machine) string {
	if m.Name != "" {
		return "root@" + m.Name
	}
	return ""
}

func fingerprints(public []string) []string {
	out := make([]string, 0, len(public))
	for _, p := range public {
		out = append(out, Fingerprint(p))
	}
	return out
}
