package rootdisk

import (
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestIssueBootNamesTheContentServed: a machine whose persistent overlay
// keeps it on the old version of a re-imported image is told that old
// content, so a kernel taken from the image matches the root it mounts.
func TestIssueBootNamesTheContentServed(t *testing.T) {
	f := newFixture(t)
	mac := mustMAC("52:54:00:00:00:01")
	write(t, f, f.issue(t, mac.String(), "persistent"), []byte("mine"), 0)
	old := f.img
	res, err := f.m.cfg.Blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat("new!", 64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	cur := inventory.Image{Name: "debian", SHA256: res.SHA256, Size: res.Size}
	for _, tt := range []struct {
		name, mac, overlay, want string
	}{
		{"persistent overlay keeps its base", mac.String(), "persistent", old.SHA256},
		{"new machine gets the new version", "52:54:00:00:00:05", "ephemeral", cur.SHA256},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := f.m.IssueBoot(mustMAC(tt.mac), cur, tt.overlay)
			if err != nil {
				t.Fatal(err)
			}
			if b.SHA256 != tt.want {
				t.Fatalf("IssueBoot serves %.12s, want %.12s", b.SHA256, tt.want)
			}
			if !strings.HasPrefix(b.Root, "nbd:10.0.0.1:10809:m-") {
				t.Fatalf("root %q, want nbd:10.0.0.1:10809:m-...", b.Root)
			}
		})
	}
}
