package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/images"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// VersionService keeps image versions; *images.Service implements it.
type VersionService interface {
	// Versions fails with an inventory.ErrNotFound error for an unknown
	// image.
	Versions(ctx context.Context, name string) ([]images.Version, error)
	// Step applies op to a version (0 for rollback); a refused step is an
	// inventory.ErrConflict error saying why.
	Step(ctx context.Context, name string, version int, op inventory.VersionOp) (inventory.ImageVersion, error)
}

// ImageVersion is an image version on the wire.
type ImageVersion struct {
	Image    string     `json:"image"`
	Version  int        `json:"version"`
	SHA256   string     `json:"sha256"`
	Parent   int        `json:"parent,omitempty"` // 0: stored whole
	State    string     `json:"state"`            // maintenance, test, production or retired
	Current  bool       `json:"current,omitempty"`
	By       string     `json:"by,omitempty"`
	Made     time.Time  `json:"made"`
	Size     int64      `json:"size"`
	Stored   int64      `json:"stored"`
	Promoted *time.Time `json:"promoted,omitempty"`
	Machine  string     `json:"machine,omitempty"`
	// Profiles and Machines are what boots the version, in lists.
	Profiles []string         `json:"profiles,omitempty"`
	Machines []VersionMachine `json:"machines,omitempty"`
}

// VersionMachine is a machine of the answering server reading a version.
type VersionMachine struct {
	MAC string `json:"mac"`
	// Persistent: its persistent overlay was made on this version, which
	// it keeps booting until machine reset.
	Persistent bool `json:"persistent,omitempty"`
}

// ImageVersionList is the answer of GET /images/{name}/versions.
type ImageVersionList struct {
	Versions []ImageVersion `json:"versions"`
}

func versionOut(v inventory.ImageVersion) ImageVersion {
	out := ImageVersion{Image: v.Image, Version: v.Version, SHA256: v.SHA256, Parent: v.Parent, State: string(v.State), By: v.By,
		Made: v.Made.UTC(), Size: v.Size, Stored: v.Stored, Machine: v.Machine}
	if !v.Promoted.IsZero() {
		p := v.Promoted.UTC()
		out.Promoted = &p
	}
	return out
}

func (s *server) versions() (VersionService, error) {
	vs, ok := s.cfg.Images.(VersionService)
	if s.cfg.Images == nil || !ok {
		return nil, errNoImages
	}
	return vs, nil
}

func (s *server) listVersions(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.versions()
	if err != nil {
		return err
	}
	vs, err := svc.Versions(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	out := ImageVersionList{Versions: make([]ImageVersion, 0, len(vs))}
	for _, v := range vs {
		o := versionOut(v.ImageVersion)
		o.Current, o.Profiles = v.Current, v.Profiles
		for _, u := range v.Users {
			o.Machines = append(o.Machines, VersionMachine{MAC: u.MAC, Persistent: u.Persistent})
		}
		out.Versions = append(out.Versions, o)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// stepVersion returns the handler of one step of a version's life; the
// version is the path's, or the current one for rollback.
func stepVersion(op inventory.VersionOp) func(*server, http.ResponseWriter, *http.Request) error {
	return func(s *server, w http.ResponseWriter, r *http.Request) error {
		svc, err := s.versions()
		if err != nil {
			return err
		}
		version := 0
		if op != inventory.OpRollback {
			raw := r.PathValue("version")
			if version, err = strconv.Atoi(raw); err != nil || version < 1 {
				return inventory.Invalid("version", "want a version number (1, 2, ...; see image versions), got %q", raw)
			}
		}
		name := r.PathValue("name")
		v, err := svc.Step(r.Context(), name, version, op)
		if err != nil {
			return err
		}
		setNote(r, fmt.Sprintf("%s version=%d state=%s sha256=%s", op, v.Version, v.State, v.SHA256))
		s.changed(r, "", "", "")
		writeJSON(w, http.StatusOK, versionOut(v))
		return nil
	}
}
