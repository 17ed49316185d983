package diskless

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/mcastgroup"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// TestRootArgsNameTheGroup: with multicast on, every root's script names
// the content's group, the request socket and the content, and a
// server-side overlay's also where its agent reads the overlay's blocks,
// which only the export's holder may read.
func TestRootArgsNameTheGroup(t *testing.T) {
	data := t.TempDir()
	images := fakeImages{}
	space, err := mcastgroup.ParseSpace("239.77.0.0/16", false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Data: data, Listen: "127.0.0.1:0", ServerIP: []byte{127, 0, 0, 1}, Images: images, BaseKey: make([]byte, 32),
		Multicast: &Multicast{Listen: netip.MustParseAddrPort("127.0.0.1:0"), TTL: 1, Rate: 1 << 20, Space: space}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetBlocksURL("http://127.0.0.1:8080" + OverlayBlocksPath)
	res, err := s.blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat("root", 64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	images["debian"] = inventory.Image{Name: "debian", SHA256: res.SHA256, Size: res.Size}
	id, _ := chunkwire.ParseContentID(res.SHA256)
	mac := []byte{0x52, 0x54, 0, 0, 0, 1}

	for _, overlay := range []string{inventory.OverlayEphemeral, inventory.OverlayClientRAM} {
		rb, err := s.IssueRoot(t.Context(), mac, inventory.Root{Image: "debian", Overlay: overlay})
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := rootarg.MulticastFromCmdline(rb.Args)
		if err != nil || !ok {
			t.Fatalf("%s: args %q name no group: %v", overlay, rb.Args, err)
		}
		if !space.Prefix().Contains(m.Group.Addr()) || m.Content != id || m.Server.Addr() != netip.MustParseAddr("127.0.0.1") || m.Server.Port() == 0 || m.Group.Port() != m.Server.Port() {
			t.Fatalf("%s: %+v: want a group in %v on the request port, content %v", overlay, m, space.Prefix(), id)
		}
		wantBlocks := overlay == inventory.OverlayEphemeral
		if got := strings.Contains(rb.Args, "bootfleet.overlay.blocks=http://127.0.0.1:8080"+OverlayBlocksPath); got != wantBlocks {
			t.Fatalf("%s: args %q: overlay blocks URL present %v, want %v", overlay, rb.Args, got, wantBlocks)
		}
	}

	rb, err := s.IssueRoot(t.Context(), mac, inventory.Root{Image: "debian", Overlay: inventory.OverlayPersistent})
	if err != nil {
		t.Fatal(err)
	}
	export := rb.Arg[strings.LastIndex(rb.Arg, ":")+1:]
	get := func(auth string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, OverlayBlocksPath, nil)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		s.OverlayBlocksHandler().ServeHTTP(w, r)
		return w
	}
	w := get("Bearer " + export)
	if w.Code != http.StatusOK {
		t.Fatalf("own export: %d %s", w.Code, w.Body)
	}
	if set, _, err := blockset.Parse(w.Body.Bytes()); err != nil || set.Blocks() != 0 {
		t.Fatalf("fresh overlay: %v, %v; want no blocks", set, err)
	}
	if w := get("Bearer " + export[:len(export)-1] + "x"); w.Code != http.StatusForbidden {
		t.Fatalf("wrong secret: %d, want 403", w.Code)
	}
	if w := get(""); w.Code != http.StatusUnauthorized {
		t.Fatalf("no credential: %d, want 401", w.Code)
	}
	if _, ok := s.MulticastStats(res.SHA256); !ok {
		t.Fatal("the content is not served by the multicast sender")
	}
	if n := len(s.Collectors()); n != 6 {
		t.Fatalf("%d multicast series for /metrics, want 6", n)
	}
}
