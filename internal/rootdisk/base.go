package rootdisk

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/bootfleet/bootfleet/internal/blockstore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// Read-only base exports serve the profiles whose machines keep their own
// writes (root.overlay client-ram or client-disk). Their names are
//
//	r-<mac with hyphens>-<image sha256>-<tag>
//
// where tag is the first 128 bits of HMAC-SHA256 over the MAC and the
// content, keyed with the fleet's base key (BaseKeyName in the shared
// store). Any server of the fleet can check a name another one issued
// without a store read and without per-machine state, which is what lets
// a machine fail over to a server that never rendered its script. The
// MAC in the name keeps the lease check (a name works only from the
// machine's leased address, where DHCP leases are known) and puts the
// sessions in the machine's boot record. A machine cannot forge the name
// of content it was never given, nor another machine's; a name stays
// valid while the content exists, since there is nothing to revoke: the
// machine can read no more than what it was already given.
const (
	basePrefix = "r-"
	baseTagLen = 32
	// BaseKeyName is the inventory secret that keys base export names.
	BaseKeyName = "nbd-base-export"
)

// NewBaseKey draws a fresh 256-bit base key, for the store to keep unless
// another server stored one first.
func NewBaseKey() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails
	return b
}

// BaseExportName is the read-only export of content sha for mac.
func BaseExportName(key []byte, mac net.HardwareAddr, sha string) string {
	return basePrefix + macPath(mac) + "-" + sha + "-" + baseTag(key, mac, sha)
}

func baseTag(key []byte, mac net.HardwareAddr, sha string) string {
	h := hmac.New(sha256.New, key)
	fmt.Fprintf(h, "bootfleet base export\x00%s\x00%s", macPath(mac), sha)
	return hex.EncodeToString(h.Sum(nil))[:baseTagLen]
}

// ParseBaseExportName splits a base export name into the MAC, the content
// and the tag; it checks the form, not the tag.
func ParseBaseExportName(name string) (net.HardwareAddr, string, string, error) {
	rest, ok := strings.CutPrefix(name, basePrefix)
	if !ok || len(rest) != macLen+1+64+1+baseTagLen || rest[macLen] != '-' || rest[macLen+65] != '-' {
		return nil, "", "", fmt.Errorf("%w: want r-52-54-00-12-34-56-SHA256-TAG, got %.80q", ErrBadName, name)
	}
	mac, err := net.ParseMAC(rest[:macLen])
	if err != nil || len(mac) != 6 || strings.Contains(rest[:macLen], ":") {
		return nil, "", "", fmt.Errorf("%w: want a MAC like 52-54-00-12-34-56 after r-, got %q", ErrBadName, rest[:macLen])
	}
	sha, tag := rest[macLen+1:macLen+65], rest[macLen+66:]
	if !isLowerHex(sha) || !isLowerHex(tag) {
		return nil, "", "", fmt.Errorf("%w: want the content's sha256 and the tag in lower-case hex", ErrBadName)
	}
	return mac, sha, tag, nil
}

// MachineOf is the MAC an export name of either kind names, or nil.
func MachineOf(name string) net.HardwareAddr {
	if mac, _, err := ParseExportName(name); err == nil {
		return mac
	}
	if mac, _, _, err := ParseBaseExportName(name); err == nil {
		return mac
	}
	return nil
}

// issueBase starts a boot whose machine keeps its own writes: it names
// the read-only base export and voids the machine's per-boot export, if
// it had one, so no server-side state of the machine outlives the switch.
// The caller holds m.mu.
func (m *Manager) issueBase(mac net.HardwareAddr, img inventory.Image, overlay string) (Issued, error) {
	if len(m.cfg.BaseKey) < 16 {
		return Issued{}, fmt.Errorf("rootdisk: root.overlay %s of image %s needs the fleet's base key, which this server did not load", overlay, img.Name)
	}
	if !m.cfg.Blobs.Has(img.SHA256) {
		return Issued{}, fmt.Errorf("rootdisk: content %.12s of image %s is missing from the data directory; import the image again", img.SHA256, img.Name)
	}
	if m.addr == "" {
		return Issued{}, fmt.Errorf("rootdisk: profile root image %s needs the NBD server, which is off; set nbd.listen", img.Name)
	}
	key := mac.String()
	if prev := m.boot[key]; prev != nil {
		delete(m.boot, key)
		if err := m.forgetBoot(mac); err != nil {
			return Issued{}, err
		}
		if prev.mode == blockstore.Ephemeral && m.att[key] == nil {
			if err := removeOverlay(m.OverlayDir(mac)); err != nil {
				return Issued{}, err
			}
			os.Remove(m.OverlayDir(mac)) // empty now: the server keeps nothing for the machine
		}
	}
	cache := "bootfleet.overlay=" + overlay
	return Issued{Root: m.rootArg(BaseExportName(m.cfg.BaseKey, mac, img.SHA256)), SHA256: img.SHA256, Args: cache}, nil
}

// lookupBase serves a base export: the content read-only, to the machine
// the name was made for.
func (m *Manager) lookupBase(name string, remote net.Addr) (nbd.Export, error) {
	mac, sha, tag, err := ParseBaseExportName(name)
	if err != nil {
		m.log.Warn("nbd export refused", "remote", addrString(remote), "reason", err.Error())
		return nil, fmt.Errorf("%w: %w", nbd.ErrUnknownExport, err)
	}
	refuse := func(reason string) (nbd.Export, error) {
		m.log.Warn("nbd export refused", "mac", mac.String(), "remote", addrString(remote), "reason", reason)
		return nil, fmt.Errorf("%w: %s", nbd.ErrRefused, reason)
	}
	if len(m.cfg.BaseKey) < 16 || subtle.ConstantTimeCompare([]byte(tag), []byte(baseTag(m.cfg.BaseKey, mac, sha))) != 1 {
		return refuse("wrong tag: not a base export name this fleet issued (or the fleet's base key changed)")
	}
	if reason := m.leaseMismatch(mac, remote); reason != "" {
		return refuse(reason)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.cfg.Blobs.Has(sha) {
		return refuse(fmt.Sprintf("content %.12s is not on this server; import the image here or let the server fetch it", sha))
	}
	img, err := m.openImage(sha)
	if err != nil {
		m.log.Error("open base image", "mac", mac.String(), "sha256", sha, "err", err)
		return nil, err
	}
	disk, _ := blockstore.Open(img, "", blockstore.None, blockstore.Options{})
	m.baseSessions++
	return &baseExport{Disk: disk, m: m, sha: sha}, nil
}

// baseExport is one session's handle on a base image.
type baseExport struct {
	blockstore.Disk
	m    *Manager
	sha  string
	once sync.Once
}

// Close ends the session; the image lingers for the next one.
func (e *baseExport) Close() error {
	var err error
	e.once.Do(func() {
		e.m.mu.Lock()
		defer e.m.mu.Unlock()
		e.m.baseSessions--
		err = e.m.closeImage(e.sha)
	})
	return err
}
