package diskless

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestMigration: a persistent machine moves at a reset only when its
// overlay was made on other content than its root picks now; an
// ephemeral root, or one that boots nothing now, moves nowhere, so its
// reset is not held up.
func TestMigration(t *testing.T) {
	images := fakeImages{}
	d, _, blobs := newKernelService(t, images)
	d.disks.SetAddr("10.0.0.1", 10809)
	var shas []string
	for _, s := range []string{"one", "two"} {
		res, err := blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat(s, 4096)))
		if err != nil {
			t.Fatal(err)
		}
		shas = append(shas, res.SHA256)
	}
	images["debian"] = inventory.Image{Name: "debian", SHA256: shas[0], Version: 1}
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	root := inventory.Root{Image: "debian", Overlay: inventory.OverlayPersistent}
	moves := func(what string, root inventory.Root, want Move, wantMoves bool) {
		t.Helper()
		mv, ok, err := d.Migration(t.Context(), mac, root)
		if err != nil || ok != wantMoves || mv != want {
			t.Fatalf("%s: Migration = %+v, %v, %v; want %+v, %v", what, mv, ok, err, want, wantMoves)
		}
	}
	moves("no overlay yet", root, Move{}, false)
	// The machine's first session makes its overlay on version 1.
	b, err := d.disks.IssueBoot(mac, images["debian"], inventory.OverlayPersistent)
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.disks.Lookup(b.Root[len("nbd:10.0.0.1:10809:"):], &net.TCPAddr{IP: net.IPv4(10, 0, 0, 20)})
	if err != nil {
		t.Fatal(err)
	}
	e.(io.Closer).Close()
	moves("on the current version", root, Move{}, false)
	images["debian"] = inventory.Image{Name: "debian", SHA256: shas[1], Version: 2}
	// fakeImages lists only the current version: version 1 is gone.
	moves("after a new version", root, Move{Image: "debian", To: 2}, true)
	moves("ephemeral", inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}, Move{}, false)
	delete(images, "debian")
	moves("image removed", root, Move{}, false)
}
