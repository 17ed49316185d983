package api

import (
	"context"
	"fmt"
	"net"
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
	// Edit opens a maintenance version that machine mac boots
	// read-write; a second edit is an inventory.ErrConflict naming the
	// holder.
	Edit(ctx context.Context, name string, mac net.HardwareAddr, by string) (inventory.ImageVersion, error)
	// Commit and Abandon close the maintenance version; while its
	// machine runs it they are refused naming it, unless force. Commit
	// returns the version still in maintenance and stores its layer in
	// the background, shown by Versions until it ends.
	Commit(ctx context.Context, name string, force bool) (inventory.ImageVersion, error)
	Abandon(ctx context.Context, name string, force bool) (inventory.ImageVersion, error)
	// StartMerge starts merging a version's layers on this server (0:
	// the current production version); Merges reports on it.
	StartMerge(ctx context.Context, name string, version int) (images.Merge, error)
	Merges() []images.Merge
}

// ImageMerge is a merge of an image version's layers into a whole file,
// on the server answering.
type ImageMerge struct {
	Image    string     `json:"image"`
	Version  int        `json:"version"`
	SHA256   string     `json:"sha256"`
	Done     int64      `json:"done"`  // bytes copied
	Total    int64      `json:"total"` // bytes to copy; 0 until the copy starts or for a version already whole
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	Error    string     `json:"error,omitempty"`
}

func mergeOut(m images.Merge) ImageMerge {
	out := ImageMerge{Image: m.Image, Version: m.Version, SHA256: m.SHA256, Done: m.Done, Total: m.Total, Started: m.Started.UTC(), Error: m.Err}
	if !m.Finished.IsZero() {
		f := m.Finished.UTC()
		out.Finished = &f
	}
	return out
}

func (s *server) mergeImage(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.versions()
	if err != nil {
		return err
	}
	version := 0
	if raw := r.URL.Query().Get("version"); raw != "" {
		if version, err = strconv.Atoi(raw); err != nil || version < 1 {
			return inventory.Invalid("version", "want a version number (1, 2, ...; see image versions), got %q", raw)
		}
	}
	m, err := svc.StartMerge(r.Context(), r.PathValue("name"), version)
	if err != nil {
		return err
	}
	setNote(r, fmt.Sprintf("merge version=%d sha256=%s", m.Version, m.SHA256))
	writeJSON(w, http.StatusAccepted, mergeOut(m))
	return nil
}

func (s *server) getMerge(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.versions()
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	for _, m := range svc.Merges() {
		if m.Image == name {
			writeJSON(w, http.StatusOK, mergeOut(m))
			return nil
		}
	}
	return inventory.NotFound("name", "no merge of image %s on this server since it started; start one with bootfleet image merge %s", name, name)
}

// EditRequest is the body of POST /images/{name}/edit.
type EditRequest struct {
	Machine string `json:"machine"` // MAC, or the name of a machine in the inventory
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
	Server   string     `json:"server,omitempty"`
	// Profiles and Machines are what boots the version, in lists.
	Profiles []string         `json:"profiles,omitempty"`
	Machines []VersionMachine `json:"machines,omitempty"`
	// ChannelMachines boot the version next by their own root channel,
	// over their profile's.
	ChannelMachines []string `json:"channel_machines,omitempty"`
	// Commit is the answering server's commit of a maintenance version
	// while it stores the layer, or after it failed.
	Commit *VersionCommit `json:"commit,omitempty"`
}

// VersionCommit is how far a commit got: it compares the whole disk with
// its parent, then the version is test.
type VersionCommit struct {
	Done     int64      `json:"done"`  // bytes of the disk compared
	Total    int64      `json:"total"` // bytes to compare
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	Error    string     `json:"error,omitempty"` // why it failed; the version stays in maintenance
}

func commitOut(c *images.Commit) *VersionCommit {
	if c == nil {
		return nil
	}
	out := &VersionCommit{Done: c.Done, Total: c.Total, Started: c.Started.UTC(), Error: c.Err}
	if !c.Finished.IsZero() {
		f := c.Finished.UTC()
		out.Finished = &f
	}
	return out
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
		Made: v.Made.UTC(), Size: v.Size, Stored: v.Stored, Machine: v.Machine, Server: v.Server}
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
		o.Current, o.Profiles, o.ChannelMachines, o.Commit = v.Current, v.Profiles, v.Machines, commitOut(v.Commit)
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

func (s *server) editImage(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.versions()
	if err != nil {
		return err
	}
	var req EditRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	mac, err := inventory.ParseMAC(req.Machine)
	if err != nil {
		r.SetPathValue("mac", req.Machine)
		m, lerr := s.lookup(r)
		if lerr != nil {
			return inventory.Invalid("machine", "want the MAC or name of the machine that edits the image, got %q", req.Machine)
		}
		mac = m.MAC
	}
	v, err := svc.Edit(r.Context(), r.PathValue("name"), mac, callerOf(r).name)
	if err != nil {
		return err
	}
	setNote(r, fmt.Sprintf("edit version=%d machine=%s parent=%d", v.Version, v.Machine, v.Parent))
	s.changed(r, mac.String(), "image.edit", fmt.Sprintf("boots image %s version %d read-write at its next boot", v.Image, v.Version))
	writeJSON(w, http.StatusCreated, versionOut(v))
	return nil
}

// closeEdit returns the handler of commit or abandon.
func closeEdit(op inventory.VersionOp) func(*server, http.ResponseWriter, *http.Request) error {
	return func(s *server, w http.ResponseWriter, r *http.Request) error {
		svc, err := s.versions()
		if err != nil {
			return err
		}
		force := false
		if v := r.URL.Query().Get("force"); v != "" {
			if force, err = strconv.ParseBool(v); err != nil {
				return inventory.Invalid("force", "want true or false, got %q", v)
			}
		}
		close := svc.Commit
		if op == inventory.OpAbandon {
			close = svc.Abandon
		}
		v, err := close(r.Context(), r.PathValue("name"), force)
		if err != nil {
			return err
		}
		setNote(r, fmt.Sprintf("%s version=%d state=%s sha256=%s forced=%v", op, v.Version, v.State, v.SHA256, force))
		s.changed(r, "", "", "")
		status := http.StatusOK
		if op == inventory.OpCommit {
			status = http.StatusAccepted // the layer is stored in the background; GET versions shows how far
		}
		writeJSON(w, status, versionOut(v))
		return nil
	}
}
