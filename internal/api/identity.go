package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// IdentityService is machines' identities as the API sees them: public
// keys and fingerprints, rendered files, never a private key.
// *identitysvc.Service implements it.
type IdentityService interface {
	// KnownHosts is a known_hosts file of the machines f selects, or of
	// machine alone when it is not nil.
	KnownHosts(ctx context.Context, f inventory.MachineFilter, machine net.HardwareAddr) (string, error)
	// Rekey makes new SSH host keys for mac and returns their fingerprints.
	Rekey(ctx context.Context, mac net.HardwareAddr) ([]string, error)
	// Files renders what mac's next boot would get.
	Files(ctx context.Context, mac net.HardwareAddr) ([]identity.File, error)
	// CheckProfile and CheckMachine refuse files: whose templates do not
	// parse or use a variable that does not exist, with
	// inventory.ErrInvalid, before the record is stored.
	CheckProfile(ctx context.Context, p inventory.Profile) error
	CheckMachine(ctx context.Context, m inventory.Machine) error
}

// KnownHosts is GET /known-hosts: a known_hosts file, one line per key.
type KnownHosts struct {
	KnownHosts string `json:"known_hosts"`
}

// RekeyResult is POST /machines/{mac}/rekey.
type RekeyResult struct {
	MAC          string   `json:"mac"`
	Fingerprints []string `json:"fingerprints"`
}

// RenderedFile is one file of GET /machines/{mac}/files.
type RenderedFile struct {
	Path    string `json:"path"`
	Mode    string `json:"mode"` // octal, e.g. 0644
	Owner   string `json:"owner,omitempty"`
	Content string `json:"content"`
}

// RenderedFiles is GET /machines/{mac}/files.
type RenderedFiles struct {
	Files []RenderedFile `json:"files"`
}

var errNoIdentities = inventory.Invalid("", "this server serves no machine identities")

// errUnavailable is the API's answer when the server lacks the identity
// key: the admin must copy it, and the message says so.
type errUnavailable struct{ error }

func identityErr(err error) error {
	if errors.Is(err, identity.ErrNoKey) {
		return &errUnavailable{err}
	}
	return err
}

func (s *server) knownHosts(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Identities == nil {
		return errNoIdentities
	}
	q := r.URL.Query()
	f := inventory.MachineFilter{Profile: q.Get("profile")}
	var mac net.HardwareAddr
	if key := q.Get("machine"); key != "" {
		m, err := s.lookupKey(r, key)
		if err != nil {
			return err
		}
		mac = m.MAC
	}
	text, err := s.cfg.Identities.KnownHosts(r.Context(), f, mac)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KnownHosts{KnownHosts: text})
	return nil
}

func (s *server) rekeyMachine(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Identities == nil {
		return errNoIdentities
	}
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	fps, err := s.cfg.Identities.Rekey(r.Context(), m.MAC)
	if err != nil {
		return identityErr(err)
	}
	setNote(r, "new ssh host keys")
	s.changed(r, m.MAC.String(), "machine.rekeyed", "new ssh host keys")
	writeJSON(w, http.StatusOK, RekeyResult{MAC: m.MAC.String(), Fingerprints: fps})
	return nil
}

func (s *server) machineFiles(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Identities == nil {
		return errNoIdentities
	}
	m, err := s.lookup(r)
	if err != nil {
		return err
	}
	files, err := s.cfg.Identities.Files(r.Context(), m.MAC)
	if err != nil {
		return err
	}
	out := RenderedFiles{Files: []RenderedFile{}}
	for _, f := range files {
		if p := r.URL.Query().Get("path"); p != "" && p != f.Path {
			continue
		}
		out.Files = append(out.Files, RenderedFile{Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode), Owner: f.Owner, Content: string(f.Content)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
