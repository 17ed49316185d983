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

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ImageFiles stores the content of root disk images; *rootdisk.Manager
// implements it.
type ImageFiles interface {
	// Import stores the image r holds as raw content, converting it
	// first when it is in another format, and returns the hex sha256 and
	// size as served and the bytes read; cancelling ctx stops it. Errors
	// about the content wrap imagestore.ErrRefused; see
	// imagestore.Store.ImportContext.
	Import(ctx context.Context, r io.Reader) (imagestore.Imported, error)
	// Release deletes content no image name points to any more, unless a
	// machine still boots from it; it reports whether it deleted it.
	Release(sha string) (bool, error)
}

// DiskResetter discards machine overlays; *rootdisk.Manager implements it.
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
}

func imageOut(img inventory.Image) Image {
	return Image{Name: img.Name, SHA256: img.SHA256, Size: img.Size, Imported: img.Imported.UTC()}
}

var errNoImages = inventory.Invalid("", "this server stores no images (started without a data directory for them)")

func (s *server) listImages(w http.ResponseWriter, r *http.Request) error {
	imgs, err := s.cfg.Store.ListImages(r.Context())
	if err != nil {
		return err
	}
	holders, err := s.imageHolders(r.Context())
	if err != nil {
		return err
	}
	out := ImageList{Images: make([]Image, 0, len(imgs))}
	for _, img := range imgs {
		v := imageOut(img)
		v.Servers = holders[img.SHA256]
		out.Images = append(out.Images, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getImage(w http.ResponseWriter, r *http.Request) error {
	img, err := s.cfg.Store.GetImage(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	holders, err := s.imageHolders(r.Context())
	if err != nil {
		return err
	}
	v := imageOut(img)
	v.Servers = holders[img.SHA256]
	writeJSON(w, http.StatusOK, v)
	return nil
}

// imageHolders maps each content to the servers holding it, with their
// status now.
func (s *server) imageHolders(ctx context.Context) (map[string][]ImageServer, error) {
	copies, err := s.cfg.Store.ListImageCopies(ctx)
	if err != nil {
		return nil, err
	}
	servers, err := s.cfg.Store.ListServers(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	status := make(map[string]string, len(servers))
	for _, si := range servers {
		status[si.Name] = si.Status(now)
	}
	out := map[string][]ImageServer{}
	for _, c := range copies { // ordered by content, then server
		st := status[c.Server]
		if st == "" {
			st = "unknown"
		}
		out[c.SHA256] = append(out[c.SHA256], ImageServer{Name: c.Server, Status: st})
	}
	return out, nil
}

// putImage stores the request body as the image's new content. The body
// is the raw image (any size; not JSON). A Content-Length, when sent, must
// match what arrives, so a cut upload is never recorded.
func (s *server) putImage(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Images == nil {
		return errNoImages
	}
	name := r.PathValue("name")
	probe := inventory.Image{Name: name, SHA256: fmt.Sprintf("%064x", 0), Size: 1}
	if err := probe.Validate(s.cfg.Now()); err != nil {
		return err
	}
	old, oldErr := s.cfg.Store.GetImage(r.Context(), name)
	if oldErr != nil && !errors.Is(oldErr, inventory.ErrNotFound) {
		return oldErr
	}
	start := s.cfg.Now()
	res, err := s.cfg.Images.Import(r.Context(), r.Body)
	if err != nil {
		return s.importError(w, name, res, err)
	}
	if r.ContentLength >= 0 && res.Received != r.ContentLength {
		return inventory.Invalid("", "received %d bytes, Content-Length said %d; upload again", res.Received, r.ContentLength)
	}
	img, err := s.cfg.Store.PutImage(r.Context(), inventory.Image{Name: name, SHA256: res.SHA256, Size: res.Size, Imported: s.cfg.Now()})
	if err != nil {
		return err
	}
	setNote(r, fmt.Sprintf("sha256=%s size=%d", res.SHA256, res.Size))
	s.log.Info("image imported", "name", name, "sha256", res.SHA256, "format", res.Format.String(), "size", res.Size,
		"allocated", res.Allocated, "received", res.Received, "seconds", s.cfg.Now().Sub(start).Seconds())
	status := http.StatusCreated
	if oldErr == nil {
		status = http.StatusOK
		if old.SHA256 != res.SHA256 {
			s.release(old)
		}
	}
	s.changed(r, "", "", "")
	w.Header().Set("Location", Prefix+"/images/"+name)
	out := imageOut(img)
	out.Format, out.Allocated = res.Format.String(), res.Allocated
	writeJSON(w, status, out)
	return nil
}

// importError answers a failed import: the uploader's mistakes (a bad
// image, an image naming other files) are 400 with what to do; a server
// without qemu-img for an upload that needs it is 501, saying what to
// install, since the one reading it is the admin who can.
func (s *server) importError(w http.ResponseWriter, name string, res imagestore.Imported, err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, imagestore.ErrRefused) || res.Received == 0:
		return inventory.Invalid("", "%v", err)
	case errors.Is(err, imagestore.ErrNoQemuImg):
		s.log.Error("image import needs qemu-img", "name", name, "format", res.Format.String(), "err", err)
		writeJSON(w, http.StatusNotImplemented, ErrorBody{Error: err.Error()})
		return nil
	}
	return fmt.Errorf("import image %s: %w", name, err)
}

func (s *server) deleteImage(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	img, err := s.cfg.Store.GetImage(r.Context(), name)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteImage(r.Context(), name); err != nil {
		return err
	}
	if s.cfg.Images != nil {
		s.release(img)
	}
	s.changed(r, "", "", "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// release drops content that the image no longer names, unless another
// name or a machine still uses it. Failures only cost disk space: logged.
func (s *server) release(img inventory.Image) {
	imgs, err := s.cfg.Store.ListImages(context.Background())
	if err != nil {
		s.log.Warn("image content kept: list images", "sha256", img.SHA256, "err", err)
		return
	}
	for _, o := range imgs {
		if o.SHA256 == img.SHA256 {
			return
		}
	}
	deleted, err := s.cfg.Images.Release(img.SHA256)
	switch {
	case err != nil:
		s.log.Warn("image content kept: remove failed", "sha256", img.SHA256, "err", err)
	case deleted:
		s.log.Info("image content removed", "image", img.Name, "sha256", img.SHA256)
	default:
		s.log.Info("image content kept while machines boot from it", "image", img.Name, "sha256", img.SHA256)
	}
}

func (s *server) resetMachine(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Disks == nil {
		return inventory.Invalid("", "this server serves no diskless roots")
	}
	force := false
	if v := r.URL.Query().Get("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			return inventory.Invalid("force", "want true or false, got %q", v)
		}
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
	if err := s.cfg.Disks.Reset(mac, force); err != nil {
		return err
	}
	details := "overlay discarded"
	if force {
		details += " (forced, machine was connected)"
	}
	s.changed(r, mac.String(), "machine.reset", details)
	writeJSON(w, http.StatusOK, ResetResult{MAC: mac.String(), Forced: force})
	return nil
}
