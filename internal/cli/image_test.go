package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/rootdisk"
)

// TestImageGolden: import an image, use it in a profile, reset machines,
// and hit the mistakes (file missing, image in use, machine connected).
func TestImageGolden(t *testing.T) {
	data := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(data, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := imagestore.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	disks, err := rootdisk.New(rootdisk.Config{Data: data, Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	disks.SetAddr("10.0.0.1", 10809)
	h, err := api.New(api.Config{Store: st, Token: testToken, Images: disks, Disks: disks, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", "")
	conn := []string{"--server", srv.URL, "--token", testToken, "--data", t.TempDir()}

	file := filepath.Join(t.TempDir(), "debian.ext4")
	if err := os.WriteFile(file, bytes.Repeat([]byte("ext4"), 750), 0o644); err != nil {
		t.Fatal(err)
	}
	// connect opens an NBD session of pc1 as its booted kernel would.
	var session io.Closer
	connect := func(t *testing.T) {
		mac, _ := net.ParseMAC("52:54:00:12:34:56")
		img, err := st.GetImage(context.Background(), "debian")
		if err != nil {
			t.Fatal(err)
		}
		arg, err := disks.Issue(mac, img, "persistent")
		if err != nil {
			t.Fatal(err)
		}
		e, err := disks.Lookup(arg[len("nbd:10.0.0.1:10809:"):], &net.TCPAddr{IP: net.IPv4(10, 0, 0, 20)})
		if err != nil {
			t.Fatal(err)
		}
		session = e.(io.Closer)
	}
	steps := []struct {
		name  string
		args  []string
		setup func(*testing.T)
	}{
		{"image-import", []string{"image", "import", "debian", file}, nil},
		{"image-import-missing", []string{"image", "import", "debian", "no-such-image.ext4"}, nil},
		{"image-import-bad-name", []string{"image", "import", "deb/ian", file}, nil},
		{"image-list", []string{"image", "list"}, nil},
		{"image-list-json", []string{"image", "list", "-o", "json"}, nil},
		{"profile-add-root", []string{"profile", "add", "lab", "--kernel", "/srv/vmlinuz", "--root-image", "debian", "--overlay", "persistent"}, nil},
		{"profile-add-bad-overlay", []string{"profile", "add", "lab2", "--kernel", "/srv/vmlinuz", "--root-image", "debian", "--overlay", "ram"}, nil},
		{"image-rm-in-use", []string{"image", "rm", "debian"}, nil},
		{"machine-reset", []string{"machine", "reset", "52:54:00:12:34:56"}, nil},
		{"machine-reset-connected", []string{"machine", "reset", "52-54-00-12-34-56"}, connect},
		{"machine-reset-force", []string{"machine", "reset", "52:54:00:12:34:56", "--force"}, nil},
		{"machine-reset-unknown-name", []string{"machine", "reset", "pc9"}, func(*testing.T) { session.Close() }},
		{"image-rm", []string{"image", "rm", "debian"}, func(t *testing.T) {
			if err := st.DeleteProfile(context.Background(), "lab"); err != nil {
				t.Fatal(err)
			}
		}},
		{"image-rm-missing", []string{"image", "rm", "debian"}, nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.setup != nil {
				s.setup(t)
			}
			golden(t, s.name, run(t, append(s.args, conn...)...))
		})
	}
	if _, err := st.ListImages(context.Background()); err != nil {
		t.Fatal(err)
	}
	var _ inventory.Images = st
}
