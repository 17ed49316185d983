package rootdisk

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestServesLayeredVersion: a version stored as a layer over the image
// is served as its content, to a machine with a persistent overlay, which
// keeps it after the image moves on.
func TestServesLayeredVersion(t *testing.T) {
	f := newFixture(t)
	content := bytes.Repeat([]byte("base"), 1<<20) // 4 MiB: layers use 64 KiB blocks
	v1, err := f.m.cfg.Blobs.ImportContext(context.Background(), bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Clone(content)
	copy(v2[1<<20:], "version two was here")
	res, err := f.m.cfg.Blobs.ImportOver(context.Background(), bytes.NewReader(v2), v1.SHA256)
	if err != nil || res.Parent != v1.SHA256 {
		t.Fatalf("ImportOver = %+v, %v; want a layer", res, err)
	}
	f.img = inventory.Image{Name: "debian", SHA256: res.SHA256, Size: res.Size}
	e, err := f.m.Lookup(f.issue(t, "52:54:00:00:00:02", "persistent"), tcp("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(v2))
	if err := readExport(e, got, 0); err != nil || !bytes.Equal(got, v2) {
		t.Fatalf("served %v; differs from version 2", err)
	}
	e.(io.Closer).Close()
	users := f.m.Users(res.SHA256)
	if len(users) != 1 || !users[0].Persistent || users[0].MAC != "52:54:00:00:00:02" {
		t.Fatalf("Users = %+v, want the machine, persistent", users)
	}
}

// TestNewContentEndsLingeringSession: a machine whose previous boot's
// session lingers (it powered off without closing it) boots a version
// promoted meanwhile: the old session is revoked at once, and the new
// boot opens an empty ephemeral overlay on the new content.
func TestNewContentEndsLingeringSession(t *testing.T) {
	f := newFixture(t)
	old, err := f.m.Lookup(f.issue(t, "52:54:00:00:00:02", "ephemeral"), tcp("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.(io.WriterAt).WriteAt([]byte("old boot"), 0); err != nil {
		t.Fatal(err)
	}
	v2 := bytes.Clone(f.bytes)
	copy(v2[4096:], "promoted")
	res, err := f.m.cfg.Blobs.ImportContext(context.Background(), bytes.NewReader(v2))
	if err != nil {
		t.Fatal(err)
	}
	f.img = inventory.Image{Name: "debian", SHA256: res.SHA256, Size: res.Size}
	name := f.issue(t, "52:54:00:00:00:02", "ephemeral")
	select {
	case <-old.Info().Revoked:
	default:
		t.Fatal("the lingering session of the previous boot was not revoked")
	}
	old.(io.Closer).Close() // the NBD server does this once revoked
	e, err := f.m.Lookup(name, tcp("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.(io.Closer).Close()
	got := make([]byte, 8200)
	if err := readExport(e, got, 0); err != nil || !bytes.Equal(got, v2[:8200]) {
		t.Fatalf("new boot reads %q..., %v; want the promoted content with an empty overlay", got[:8], err)
	}
}
