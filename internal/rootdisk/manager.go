package rootdisk

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// LeaseLookup says which address DHCP leased to a MAC, if it knows.
type LeaseLookup interface {
	LeaseIP(mac net.HardwareAddr) (net.IP, bool)
}

// Config configures a Manager.
type Config struct {
	// Data is the data directory; overlays go to Data/overlays/. Required.
	Data string
	// Blobs holds the image content. Required.
	Blobs *imagestore.Store
	// Leases, if set, ties each export to the leased source address.
	Leases LeaseLookup
	// BaseKey keys the names of read-only base exports (see base.go); the
	// fleet shares it through the store (BaseKeyName). Without it, client
	// overlays cannot be issued or served.
	BaseKey []byte
	// BlockSize is the overlays' allocation unit; 0 for blockstore's default.
	BlockSize int
	// ImageLinger is how long a base image in memory (tmpfs) stays open
	// after its last session ends: 0 for two minutes, negative to close it
	// at once. An image on a disk always closes at once.
	ImageLinger time.Duration
	Logger      *slog.Logger // default: discard
	Now         func() time.Time
}

// Manager issues per-boot exports and serves them. It implements
// nbd.Exports. Safe for concurrent use.
type Manager struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex
	addr string                 // SERVER_IP:PORT of the NBD server; "" when off
	boot map[string]*boot       // by MAC; the boot the latest script named
	att  map[string]*attachment // by MAC; the disk open for its sessions
	// images are the base images attachments read, by blob sha.
	images map[string]*sharedImage
	// baseSessions counts open sessions of read-only base exports.
	baseSessions int
}

// boot is what one script render promised a machine.
type boot struct {
	secret string
	image  string // name, for logs
	sha    string
	mode   blockstore.Mode
	issued time.Time
	// dir holds the overlay when it is not the machine's own: the writes
	// of an image version the machine edits (see edit.go).
	dir string
	// empty says an ephemeral overlay must be emptied at the first open:
	// a session of the previous boot still held it when this one began.
	empty bool
}

// attachment is a machine's open disk, shared by its NBD sessions.
type attachment struct {
	sha     string
	mode    blockstore.Mode
	dir     string // the overlay's directory
	base    content
	disk    blockstore.Disk
	refs    int
	revoked chan struct{} // closed by a forced reset: its sessions end
}

// New returns a Manager. Call SetAddr once the NBD server listens.
func New(cfg Config) (*Manager, error) {
	if cfg.Data == "" || cfg.Blobs == nil {
		return nil, errors.New("rootdisk: Data and Blobs are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, boot: map[string]*boot{}, att: map[string]*attachment{}, images: map[string]*sharedImage{}}
	if err := m.loadBoots(); err != nil {
		return nil, err
	}
	return m, nil
}

// SetAddr sets the SERVER_IP:PORT that scripts send clients to.
func (m *Manager) SetAddr(ip string, port int) {
	m.mu.Lock()
	m.addr = net.JoinHostPort(ip, fmt.Sprint(port))
	m.mu.Unlock()
}

// OverlayDir is where mac's overlay lives.
func (m *Manager) OverlayDir(mac net.HardwareAddr) string {
	return filepath.Join(m.cfg.Data, "overlays", macPath(mac))
}

// baseFile records, next to a persistent overlay, the image content the
// overlay was made on, so re-importing the image name does not move the
// machine's own blocks onto another base.
const baseFile = "base-sha256"

// Issue starts a new boot of mac on img with overlay mode (ephemeral,
// persistent or none; empty means ephemeral) and returns the value of
// bootfleet.root: nbd:SERVER_IP:PORT:EXPORT. It voids the export the
// previous script named. An ephemeral overlay is discarded here, so every
// boot starts clean, whether or not the machine ever connected.
func (m *Manager) Issue(mac net.HardwareAddr, img inventory.Image, overlay string) (string, error) {
	b, err := m.IssueBoot(mac, img, overlay)
	return b.Root, err
}

// Issued is a boot IssueBoot started.
type Issued struct {
	Root string // the value of bootfleet.root: nbd:SERVER_IP:PORT:EXPORT
	// SHA256 is the image content the export serves: img's, or the older
	// content a persistent overlay was made on. A kernel taken from the
	// image must come from this content.
	SHA256 string
	// Args are more kernel parameters the root needs, e.g.
	// bootfleet.overlay=client-ram; empty for server-side overlays.
	Args string
}

// IssueBoot is Issue, also saying which image content the boot reads.
func (m *Manager) IssueBoot(mac net.HardwareAddr, img inventory.Image, overlay string) (Issued, error) {
	if overlay == "" {
		overlay = inventory.OverlayEphemeral
	}
	if inventory.ClientOverlay(overlay) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.issueBase(mac, img, overlay)
	}
	mode, err := blockstore.ParseMode(overlay)
	if err != nil {
		return Issued{}, err
	}
	sha := img.SHA256
	dir := m.OverlayDir(mac)
	if mode == blockstore.Persistent {
		if old, err := os.ReadFile(filepath.Join(dir, baseFile)); err == nil && strings.TrimSpace(string(old)) != sha {
			oldSHA := strings.TrimSpace(string(old))
			if !m.cfg.Blobs.Has(oldSHA) {
				return Issued{}, fmt.Errorf("rootdisk: the persistent overlay of %s was made on content %.12s of image %s, which is gone; run bootfleet machine reset %s --migrate (it loses what it wrote)", mac, oldSHA, img.Name, mac)
			}
			m.log.Warn("machine keeps the image version its persistent overlay was made on; reset it to move to the new one",
				"mac", mac.String(), "image", img.Name, "kept_sha256", oldSHA, "current_sha256", sha, "hint", "bootfleet machine reset "+mac.String())
			sha = oldSHA
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Under the lock, so InUse's drop cannot delete the content between this
	// check and the boot that pins it.
	if !m.cfg.Blobs.Has(sha) {
		return Issued{}, fmt.Errorf("rootdisk: content %.12s of image %s is missing from the data directory; import the image again", sha, img.Name)
	}
	if m.addr == "" {
		return Issued{}, fmt.Errorf("rootdisk: profile root image %s needs the NBD server, which is off; set nbd.listen", img.Name)
	}
	key := mac.String()
	empty := false
	if a := m.att[key]; a != nil && a.sha == sha && a.mode == mode && a.dir == dir && mode == blockstore.Ephemeral {
		// A session of the previous boot lingers (its TCP connection died
		// with the reboot but the server has not noticed): hand its open
		// overlay to the new boot, emptied.
		m.log.Warn("new boot while the previous one is still connected; discarding its overlay under the old session", "mac", key, "sessions", a.refs)
		if r, ok := a.disk.(interface{ Reset() error }); ok {
			if err := r.Reset(); err != nil {
				return Issued{}, fmt.Errorf("rootdisk: reset ephemeral overlay of %s: %w", mac, err)
			}
		}
	} else if a == nil && mode == blockstore.Ephemeral {
		if err := removeOverlay(dir); err != nil {
			return Issued{}, err
		}
	} else if a != nil && (a.sha != sha || a.mode != mode || a.dir != dir) {
		// A session of the previous boot lingers on other content (a
		// version promoted meanwhile) or another overlay: the machine is
		// booting again, so it is dead. End it now rather than when TCP
		// notices, so the new boot's connect finds the disk free; an
		// ephemeral overlay is emptied at the new boot's first open.
		m.log.Warn("new boot on other content while the previous one is still connected; closing its sessions", "mac", key, "sessions", a.refs)
		revoke(a)
		empty = mode == blockstore.Ephemeral
	}
	b := &boot{secret: newSecret(), image: img.Name, sha: sha, mode: mode, issued: m.cfg.Now(), empty: empty}
	if err := m.saveBoot(mac, b); err != nil {
		return Issued{}, err
	}
	m.boot[key] = b
	return Issued{Root: m.rootArg(ExportName(mac, b.secret)), SHA256: sha}, nil
}

// rootArg is the value of bootfleet.root for export. The caller holds m.mu.
func (m *Manager) rootArg(export string) string { return "nbd:" + m.addr + ":" + export }

func removeOverlay(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := blockstore.RemoveOverlay(dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, baseFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rootdisk: %w", err)
	}
	return nil
}

// Lookup implements nbd.Exports: it serves the export the machine's latest
// script named, to that machine only.
func (m *Manager) Lookup(name string, remote net.Addr) (nbd.Export, error) {
	if strings.HasPrefix(name, basePrefix) {
		return m.lookupBase(name, remote)
	}
	mac, secret, err := ParseExportName(name)
	if err != nil {
		m.log.Warn("nbd export refused", "remote", addrString(remote), "reason", err.Error())
		return nil, fmt.Errorf("%w: %w", nbd.ErrUnknownExport, err)
	}
	key := mac.String()
	refuse := func(reason string) (nbd.Export, error) {
		m.log.Warn("nbd export refused", "mac", key, "remote", addrString(remote), "reason", reason)
		return nil, fmt.Errorf("%w: %s", nbd.ErrRefused, reason)
	}
	m.mu.Lock()
	b := m.boot[key]
	m.mu.Unlock()
	if b == nil {
		return refuse("no boot issued for this machine (or it was reset); reboot it so its script names a fresh export")
	}
	if subtle.ConstantTimeCompare([]byte(secret), []byte(b.secret)) != 1 {
		return refuse("wrong secret: not the export of this machine's latest boot script")
	}
	if reason := m.leaseMismatch(mac, remote); reason != "" {
		return refuse(reason)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.boot[key] != b {
		return refuse("the machine's script was rendered again meanwhile; this export is void")
	}
	a := m.att[key]
	if a == nil {
		if a, err = m.open(mac, b); err != nil {
			m.log.Error("open machine disk", "mac", key, "image", b.image, "err", err)
			return nil, err
		}
		m.att[key] = a
	} else if a.sha != b.sha || a.mode != b.mode || a.dir != dirOf(m, mac, b) {
		return refuse(fmt.Sprintf("a session of the previous boot (image %.12s, overlay %v) is still open; retry once it ends", a.sha, a.mode))
	}
	a.refs++
	return &export{Disk: a.disk, m: m, key: key, a: a}, nil
}

// leaseMismatch says why remote may not open mac's export, or "" when it
// may: where DHCP leased mac an address, only that address may. The lease
// may come from the database: call it without m.mu.
func (m *Manager) leaseMismatch(mac net.HardwareAddr, remote net.Addr) string {
	if m.cfg.Leases == nil {
		return ""
	}
	if want, ok := m.cfg.Leases.LeaseIP(mac); ok {
		if got := remoteIP(remote); got == nil || !got.Equal(want) {
			return fmt.Sprintf("source address %v is not the machine's DHCP lease %v", got, want)
		}
	}
	return ""
}

func (m *Manager) open(mac net.HardwareAddr, b *boot) (*attachment, error) {
	base, err := m.openImage(b.sha)
	if err != nil {
		return nil, err
	}
	mode, dir := b.mode, m.OverlayDir(mac)
	if b.dir != "" {
		dir = b.dir
	}
	if b.empty {
		if err := removeOverlay(dir); err != nil {
			return nil, err
		}
		b.empty = false
	}
	if mode == blockstore.Ephemeral {
		// Ephemeral across boots, kept across reconnects within a boot:
		// Issue empties it, not the open.
		mode = blockstore.Persistent
	}
	disk, err := blockstore.Open(base, dir, mode, blockstore.Options{BlockSize: m.cfg.BlockSize, BaseID: b.sha})
	if err != nil {
		m.closeImage(b.sha)
		return nil, err
	}
	if b.mode == blockstore.Persistent {
		if err := os.WriteFile(filepath.Join(dir, baseFile), []byte(b.sha+"\n"), 0o600); err != nil {
			disk.Close()
			m.closeImage(b.sha)
			return nil, fmt.Errorf("rootdisk: record overlay base: %w", err)
		}
	}
	return &attachment{sha: b.sha, mode: b.mode, dir: dir, base: base, disk: disk, revoked: make(chan struct{})}, nil
}

// detach ends one session; the last one closes the disk.
func (m *Manager) detach(key string, a *attachment) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	a.refs--
	if a.refs > 0 {
		return nil
	}
	if m.att[key] == a {
		delete(m.att, key)
	}
	return errors.Join(a.disk.Close(), m.closeImage(a.sha))
}

// export is one session's handle on a shared disk.
type export struct {
	blockstore.Disk
	m    *Manager
	key  string
	a    *attachment
	once sync.Once
}

// Close ends the session (the server calls it once); the disk stays open
// for the machine's other sessions.
func (e *export) Close() error {
	var err error
	e.once.Do(func() { err = e.m.detach(e.key, e.a) })
	return err
}

// Info is the disk's, with two additions. MultiConn: every session of a
// machine shares its attachment's one Disk (Lookup refuses a session of
// another image or mode), and a Disk's Flush covers every write that
// completed before it, whichever session made it. Revoked is closed when
// a forced reset takes the disk away: the NBD server then ends the
// machine's sessions.
func (e *export) Info() nbd.ExportInfo {
	info := e.Disk.Info()
	info.MultiConn, info.Revoked = true, e.a.revoked
	return info
}

// OpenSessions is the number of open NBD sessions of all machines. It
// walks the attached machines under the lock: fine every few seconds, not
// per request.
func (m *Manager) OpenSessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.baseSessions
	for _, a := range m.att {
		n += a.refs
	}
	return n
}

// Sessions is the number of open NBD sessions of mac.
func (m *Manager) Sessions(mac net.HardwareAddr) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.att[mac.String()]; a != nil {
		return a.refs
	}
	return 0
}

// Reset discards mac's overlay: its next boot reads the pristine image. It
// refuses (inventory.ErrConflict) while the machine has an open NBD
// session, unless force: then the overlay is emptied, the export is voided
// and the machine's NBD sessions are closed, so it must reboot.
func (m *Manager) Reset(mac net.HardwareAddr, force bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := mac.String()
	if a := m.att[key]; a != nil {
		if !force {
			return inventory.Conflict("mac", "machine %s has %d open NBD session(s); shut it down first, or pass --force to discard its disk under it", key, a.refs)
		}
		if r, ok := a.disk.(interface{ Reset() error }); ok {
			if err := r.Reset(); err != nil {
				return fmt.Errorf("rootdisk: reset overlay of %s: %w", key, err)
			}
		}
		os.Remove(filepath.Join(m.OverlayDir(mac), baseFile))
		delete(m.boot, key)
		revoke(a)
		if err := m.forgetBoot(mac); err != nil {
			return err
		}
		m.log.Warn("overlay discarded under a connected machine; its NBD sessions are closed and it must reboot", "mac", key, "sessions", a.refs)
		return nil
	}
	if err := removeOverlay(m.OverlayDir(mac)); err != nil {
		return err
	}
	m.log.Info("overlay discarded", "mac", key)
	return nil
}

func remoteIP(a net.Addr) net.IP {
	switch x := a.(type) {
	case *net.TCPAddr:
		return x.IP
	case nil:
		return nil
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil
	}
	return net.ParseIP(host)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
