package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/images"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ImageService keeps the fleet's images, with the rules of what may be
// removed; *images.Service implements it.
type ImageService interface {
	List(ctx context.Context) ([]images.Listed, error)
	// Get fails with an inventory.ErrNotFound error for an unknown name.
	Get(ctx context.Context, name string) (images.Listed, error)
	// Import errors about the upload wrap images.ErrRefused; a server
	// without qemu-img for an upload that needs it fails with
	// images.ErrNoQemuImg.
	Import(ctx context.Context, up images.Upload) (images.Imported, error)
	// Remove fails with inventory errors: ErrConflict while a profile
	// uses the image, ErrNotFound for an unknown name.
	Remove(ctx context.Context, name string) error
}

// DiskResetter discards machine overlays; *diskless.Service implements it.
type DiskResetter interface {
	// Reset fails with an inventory.ErrConflict error while the machine
	// is connected, unless force.
	Reset(mac net.HardwareAddr, force bool) error
}

// Image is an image on the wire.
type Image struct {
	Name     string    `json:"name"`
	SHA256   string    `json:"sha256"` // of the content as served (raw)
	Size     int64     `json:"size"`   // bytes as served: a converted image's virtual size
	Imported time.Time `json:"imported"`
	// Version is the current production version, whose content this is.
	Version int `json:"version,omitempty"`
	// Made is only in the answer to an import: the version it made.
	Made *ImageVersion `json:"made,omitempty"`
	// Format and Allocated are only in the answer to an import: Format is
	// the upload's ("raw", or "qcow2", "vmdk", ... when converted),
	// Allocated the bytes the stored content takes on the server's disk
	// (less than Size: stored sparse).
	Format    string `json:"format,omitempty"`
	Allocated int64  `json:"allocated,omitempty"`
	// Servers are the servers of the fleet that hold the content, in
	// lists and gets; none yet when no server has recorded it.
	Servers []ImageServer `json:"servers,omitempty"`
}

// ImageServer is a server holding an image's content.
type ImageServer struct {
	Name   string `json:"name"`
	Status string `json:"status"` // live, stale, stopped, or unknown (not registered)
}

// ImageList is the answer of GET /images.
type ImageList struct {
	Images []Image `json:"images"`
}

// ResetResult is the answer of POST /machines/{mac}/reset.
type ResetResult struct {
	MAC    string `json:"mac"`
	Forced bool   `json:"forced"`
	// Migrated is the version change of a persistent machine reset with
	// migrate=true; absent when its version stays.
	Migrated *VersionMove `json:"migrated,omitempty"`
}

// VersionMove is a persistent machine's move to another image version:
// its overlay was made on version From (0: content no version names any
// more) and it boots To after the reset.
type VersionMove struct {
	Image string `json:"image"`
	From  int    `json:"from"`
	To    int    `json:"to"`
}

// MigrationChecker says which version a reset moves a persistent
// machine to.
type MigrationChecker interface {
	// Migration reports whether mac's persistent overlay was made on
	// another version than the one it boots next, and which.
	Migration(ctx context.Context, mac net.HardwareAddr) (VersionMove, bool, error)
}

func imageOut(img images.Listed) Image {
	out := Image{Name: img.Name, SHA256: img.SHA256, Size: img.Size, Imported: img.Imported.UTC(), Version: img.Version}
	for _, h := range img.Holders {
		out.Servers = append(out.Servers, ImageServer{Name: h.Server, Status: h.Status})
	}
	return out
}

var errNoImages = inventory.Invalid("", "this server stores no images (started without a data directory for them)")

func (s *server) listImages(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return errNoImages
	}
	imgs, err := s.cfg.Images.List(r.Context())
	if err != nil {
		return err
	}
	out := ImageList{Images: make([]Image, 0, len(imgs))}
	for _, img := range imgs {
		out.Images = append(out.Images, imageOut(img))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return errNoImages
	}
	img, err := s.cfg.Images.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, imageOut(img))
	return nil
}

// putImage stores the request body as the image's new content. The body
// is the raw image (any size; not JSON).
func (s *server) putImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return errNoImages
	}
	name := r.PathValue("name")
	body := io.Reader(r.Body)
	if r.ContentLength >= 0 {
		body = &lengthReader{r: r.Body, want: r.ContentLength}
	}
	state := inventory.VersionState(r.URL.Query().Get("state"))
	res, err := s.cfg.Images.Import(r.Context(), images.Upload{Name: name, Body: body, By: callerOf(r).name, State: state})
	switch {
	case errors.Is(err, images.ErrRefused):
		return inventory.Invalid("", "%v", err)
	case errors.Is(err, images.ErrNoQemuImg):
		writeJSON(w, http.StatusNotImplemented, ErrorBody{Error: err.Error()})
		return nil
	case err != nil:
		return err
	}
	setNote(r, fmt.Sprintf("version=%d state=%s sha256=%s size=%d", res.Version.Version, res.Version.State, res.Version.SHA256, res.Version.Size))
	status := http.StatusCreated
	if res.Replaced {
		status = http.StatusOK
	}
	s.changed(r, "", "", "")
	w.Header().Set("Location", Prefix+"/images/"+name)
	out := imageOut(images.Listed{Image: res.Image})
	out.Format, out.Allocated = res.Format.String(), res.Allocated
	made := versionOut(res.Version)
	out.Made = &made
	writeJSON(w, status, out)
	return nil
}

// lengthReader fails at the end of a body that is not as long as its
// Content-Length said, so a cut upload is never recorded.
type lengthReader struct {
	r    io.Reader
	n    int64
	want int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	k, err := l.r.Read(p)
	l.n += int64(k)
	if err == io.EOF && l.n != l.want {
		return k, inventory.Invalid("", "received %d bytes, Content-Length said %d; upload again", l.n, l.want)
	}
	return k, err
}

func (s *server) deleteImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return errNoImages
	}
	if err := s.cfg.Images.Remove(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	s.changed(r, "", "", "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) resetMachine(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Disks == nil {
		return inventory.Invalid("", "this server serves no diskless roots")
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	migrate, err := boolParam(r, "migrate")
	if err != nil {
		return err
	}
	// Machines booted through the default profile need not be in the
	// inventory, so a MAC is enough.
	mac, err := inventory.ParseMAC(r.PathValue("mac"))
	if err != nil {
		m, lerr := s.lookup(r)
		if lerr != nil {
			return lerr
		}
		mac = m.MAC
	}
	res := ResetResult{MAC: mac.String(), Forced: force}
	if s.cfg.Migrations != nil {
		mv, moves, err := s.cfg.Migrations.Migration(r.Context(), mac)
		if err != nil {
			return err
		}
		if moves && !migrate {
			return inventory.Conflict("migrate", "machine %s's persistent overlay was made on %s and the machine now boots version %d: "+
				"a reset discards everything the machine wrote to its disk and moves it to version %d; pass --migrate (migrate=true) if that is wanted",
				mac, fromVersion(mv), mv.To, mv.To)
		}
		if moves {
			res.Migrated = &mv
		}
	}
	if err := s.cfg.Disks.Reset(mac, force); err != nil {
		return err
	}
	details := "overlay discarded"
	if force {
		details += " (forced, machine was connected)"
	}
	if mv := res.Migrated; mv != nil {
		details += fmt.Sprintf("; moved from %s to version %d", fromVersion(*mv), mv.To)
	}
	s.changed(r, mac.String(), "machine.reset", details)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// fromVersion names the version a persistent overlay was made on.
func fromVersion(mv VersionMove) string {
	if mv.From == 0 {
		return fmt.Sprintf("content of image %s that no version names any more", mv.Image)
	}
	return fmt.Sprintf("version %d of image %s", mv.From, mv.Image)
}

// boolParam reads query parameter name as a boolean, false if absent.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, inventory.Invalid(name, "want true or false, got %q", v)
	}
	return b, nil
}
