package rootdisk

import (
	"errors"
	"testing"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

// TestOverlayBlocks: a persistent machine's agent learns the blocks it
// wrote in an earlier boot, with its export name as the credential; a
// wrong secret, another machine's address or a base export learn nothing,
// and asking leaves no session open.
func TestOverlayBlocks(t *testing.T) {
	f := newFixture(t)
	const mac = "52:54:00:00:00:02"
	name := f.issue(t, mac, "persistent")
	e, err := f.m.Lookup(name, tcp("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(make([]byte, 100), 5*4096+10); err != nil {
		t.Fatal(err)
	}
	e.Flush()
	e.Close()
	name = f.issue(t, mac, "persistent") // the next boot
	b, err := f.m.OverlayBlocks(name, tcp("10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	set, shift, err := blockset.Parse(b)
	if err != nil || shift != 12 || set.Blocks() != 1 || !set.Has(5) {
		t.Fatalf("blocks %v shift %d (%v), want block 5 of 4 KiB", set.Extents(), shift, err)
	}
	if n := f.m.Sessions(mustMAC(mac)); n != 0 {
		t.Fatalf("%d sessions open after the blocks were read, want 0", n)
	}
	for _, bad := range []struct{ name, remote string }{
		{wrongSecret(name), "10.0.0.2"},
		{name, "10.0.0.9"},
		{"r-52-54-00-00-00-02-x", "10.0.0.2"},
	} {
		if _, err := f.m.OverlayBlocks(bad.name, tcp(bad.remote)); !errors.Is(err, nbd.ErrRefused) && !errors.Is(err, nbd.ErrUnknownExport) {
			t.Errorf("%s from %s: got %v, want refused", bad.name, bad.remote, err)
		}
	}
	eph := f.issue(t, "52:54:00:00:00:01", "ephemeral")
	if b, err := f.m.OverlayBlocks(eph, tcp("10.0.0.1")); err != nil || len(b) == 0 {
		t.Fatalf("fresh ephemeral overlay: %x, %v; want an empty set", b, err)
	} else if set, _, _ := blockset.Parse(b); set.Blocks() != 0 {
		t.Fatalf("fresh ephemeral overlay holds %d blocks", set.Blocks())
	}
}
