package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/images"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// noBoots is a server none of whose machines boots from anything.
type noBoots struct{}

func (noBoots) Users(string) []rootdisk.Use { return nil }

func (noBoots) InUse(_ string, drop func() error) (bool, error) {
	if drop == nil {
		return false, nil
	}
	return false, drop()
}

// failingBlobs is an image store failing every import with err.
type failingBlobs struct {
	*imagestore.Store
	err error
}

func (f failingBlobs) ImportContext(context.Context, io.Reader) (imagestore.Imported, error) {
	return imagestore.Imported{Format: imagestore.QCOW2, Received: 1}, f.err
}

// newImageEnv runs the API with an images service on blobs; this server
// is "here".
func newImageEnv(t *testing.T, blobs images.Blobs) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	svc, err := images.New(images.Config{Self: "here", Store: st, Blobs: blobs, Boots: noBoots{}, Peers: &imagepeer.Client{}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: st, Token: token, Images: svc, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: st, srv: httptest.NewServer(h)}
	t.Cleanup(e.srv.Close)
	return e
}

// put uploads body as image name and decodes the answer: an Image, or the
// error in ErrorBody.
func (e *env) put(t *testing.T, name string, body []byte) (int, Image, ErrorBody) {
	t.Helper()
	req, err := http.NewRequest("PUT", e.srv.URL+Prefix+"/images/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var img Image
	var eb ErrorBody
	if resp.StatusCode < 300 {
		err = json.Unmarshal(b, &img)
	} else {
		err = json.Unmarshal(b, &eb)
	}
	if err != nil {
		t.Fatalf("PUT %s: %v in %q", name, err, b)
	}
	return resp.StatusCode, img, eb
}

func TestPutImageRaw(t *testing.T) {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, s)
	disk := make([]byte, 8<<20) // 8 MiB, 4 KiB of it data
	copy(disk[1<<20:], bytes.Repeat([]byte("root"), 1024))
	want := sha256.Sum256(disk)
	code, img, eb := e.put(t, "debian", disk)
	if code != http.StatusCreated || img.SHA256 != hex.EncodeToString(want[:]) || img.Size != int64(len(disk)) || img.Format != "raw" {
		t.Fatalf("PUT: %d %+v %+v; want 201, raw, sha256 %x, size %d", code, img, eb, want, len(disk))
	}
	if img.Allocated <= 0 || img.Allocated > 64<<10 {
		t.Fatalf("allocated %d bytes, want the 4 KiB of data and little more", img.Allocated)
	}
	var got Image
	e.mustDo(t, "GET", "/images/debian", "", http.StatusOK, &got)
	if got.SHA256 != img.SHA256 || got.Size != img.Size || got.Format != "" || got.Allocated != 0 {
		t.Fatalf("GET: %+v; want the import's hash and size, no format or allocated", got)
	}
}

// TestPutImageQCOW2: a qcow2 upload is stored as the raw disk it holds.
func TestPutImageQCOW2(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatal("BOOTFLEET_CI=1 but qemu-img is not installed; run scripts/deps.sh")
		}
		t.Skip("qemu-img not installed (apt-get install qemu-utils)")
	}
	dir := t.TempDir()
	disk := make([]byte, 64<<20)
	copy(disk[5<<20:], bytes.Repeat([]byte("qcow"), 1<<18))
	raw, qcow2 := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(raw, disk, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow2).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	body, err := os.ReadFile(qcow2)
	if err != nil {
		t.Fatal(err)
	}
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, s)
	want := sha256.Sum256(disk)
	code, img, eb := e.put(t, "debian", body)
	if code != http.StatusCreated || img.Format != "qcow2" || img.SHA256 != hex.EncodeToString(want[:]) || img.Size != int64(len(disk)) {
		t.Fatalf("PUT: %d %+v %+v; want 201, qcow2, the raw disk's sha256 %x and size %d", code, img, eb, want, len(disk))
	}
	if img.Allocated > 4<<20 {
		t.Fatalf("allocated %d bytes, want about the 1 MiB of data", img.Allocated)
	}
	if !s.Has(img.SHA256) {
		t.Fatalf("content %s not stored", img.SHA256)
	}
}

func TestPutImageRefused(t *testing.T) {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := newImageEnv(t, s)
	noQemu := newImageEnv(t, failingBlobs{s, fmt.Errorf("%w: install it on the server (apt-get install qemu-utils)", imagestore.ErrNoQemuImg)})
	qcow2Backing := make([]byte, 512)
	copy(qcow2Backing, "QFI\xfb\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x01\x00")
	tests := []struct {
		name   string
		e      *env
		body   []byte
		status int
		msg    string
	}{
		{"empty", real, nil, 400, "image is empty"},
		{"vmdk descriptor", real, []byte("# Disk DescriptorFile\nversion=1\nRW 2048 FLAT \"/dev/sda\" 0\n"), 400,
			"VMDK descriptor file: its data is in the extent files it names, which are not uploaded; convert it to a single file first"},
		{"qcow2 backing file", real, qcow2Backing, 400, "qcow2 image has a backing file, which is not uploaded"},
		{"no qemu-img", noQemu, []byte("QFI\xfb"), 501, "apt-get install qemu-utils"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, eb := tt.e.put(t, "debian", tt.body)
			if code != tt.status || !strings.Contains(eb.Error, tt.msg) {
				t.Fatalf("PUT: %d %q; want %d saying %q", code, eb.Error, tt.status, tt.msg)
			}
			tt.e.mustDo(t, "GET", "/images/debian", "", http.StatusNotFound, nil)
		})
	}
}

// TestImageServers: lists and gets name the servers holding each image's
// content, with their status.
func TestImageServers(t *testing.T) {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, s)
	_, img, _ := e.put(t, "debian", []byte("a tiny raw root"))
	_, other, _ := e.put(t, "alpine", []byte("another tiny raw root"))
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) // the env's clock
	for _, si := range []inventory.ServerInfo{{Name: "boot-a", Started: now}, {Name: "boot-b", Started: now.Add(-time.Hour)}} {
		if err := e.store.RegisterServer(ctx, si); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []inventory.ImageCopy{{Server: "boot-b", SHA256: img.SHA256}, {Server: "boot-a", SHA256: img.SHA256}, {Server: "boot-gone", SHA256: img.SHA256}} {
		if err := e.store.AddImageCopy(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// "here" imported both and is not registered.
	want := []ImageServer{{Name: "boot-a", Status: "live"}, {Name: "boot-b", Status: "stale"}, {Name: "boot-gone", Status: "unknown"}, {Name: "here", Status: "unknown"}}
	var got Image
	e.mustDo(t, "GET", "/images/debian", "", http.StatusOK, &got)
	if !reflect.DeepEqual(got.Servers, want) {
		t.Fatalf("GET servers = %+v, want %+v", got.Servers, want)
	}
	var list ImageList
	e.mustDo(t, "GET", "/images", "", http.StatusOK, &list)
	hereOnly := []ImageServer{{Name: "here", Status: "unknown"}}
	if len(list.Images) != 2 || list.Images[0].Name != other.Name || !reflect.DeepEqual(list.Images[0].Servers, hereOnly) || !reflect.DeepEqual(list.Images[1].Servers, want) {
		t.Fatalf("GET /images = %+v, want alpine held by here only, debian by %+v", list.Images, want)
	}
}

// TestPutImageCut: a body shorter than its Content-Length is refused with
// what arrived, and nothing is recorded. (A real client cannot send one;
// a proxy that cuts the body can.)
func TestPutImageCut(t *testing.T) {
	s, err := imagestore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newImageEnv(t, s)
	req := httptest.NewRequest("PUT", Prefix+"/images/debian", strings.NewReader("a tiny raw root, cut"))
	req.ContentLength = 1000
	req.Header.Set("Authorization", bearer)
	rec := httptest.NewRecorder()
	e.srv.Config.Handler.ServeHTTP(rec, req)
	var eb ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || rec.Code != http.StatusBadRequest ||
		eb.Error != "received 20 bytes, Content-Length said 1000; upload again" {
		t.Fatalf("PUT of a cut body: %d %q (%v); want 400 saying what arrived", rec.Code, rec.Body, err)
	}
	e.mustDo(t, "GET", "/images/debian", "", http.StatusNotFound, nil)
	if shas, err := s.List(); err != nil || len(shas) != 0 {
		t.Fatalf("content stored from a cut body: %v %v", shas, err)
	}
}
