package diskless

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
)

// TestChannels: a root following production, test or a pinned version
// boots that version's content, read from the store at every render, so
// a promote moves the next boot of every server on the store.
func TestChannels(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := New(Config{Data: t.TempDir(), Listen: "127.0.0.1:0", ServerIP: net.IPv4(127, 0, 0, 1), Images: st,
		BaseKey: bytes.Repeat([]byte{5}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var shas []string
	for i, body := range []string{"version one", "version two"} {
		res, err := s.Blobs().ImportContext(ctx, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		shas = append(shas, res.SHA256)
		if _, err := st.AddImageVersion(ctx, inventory.ImageVersion{Image: "lab", SHA256: res.SHA256, Size: res.Size,
			State: inventory.VersionTest, By: "t", Stored: res.Allocated, Parent: i}); err != nil {
			t.Fatal(err)
		}
	}
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	boots := func(channel string) string {
		t.Helper()
		root, err := s.IssueRoot(ctx, mac, inventory.Root{Image: "lab", Overlay: "ephemeral", Channel: channel})
		if err != nil {
			t.Fatalf("channel %q: %v", channel, err)
		}
		return root.SHA256
	}
	if boots("") != shas[0] || boots("test") != shas[1] || boots("1") != shas[0] || boots("2") != shas[1] {
		t.Fatal("the channels do not boot production 1, test 2 and the pins")
	}
	if _, err := st.StepImageVersion(ctx, "lab", 2, inventory.OpPromote, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if boots("") != shas[1] || boots("1") != shas[0] {
		t.Fatal("after promote, production does not boot version 2, or the pin moved")
	}
	if _, err := s.IssueRoot(ctx, mac, inventory.Root{Image: "lab", Overlay: "ephemeral", Channel: "7"}); err == nil || !strings.Contains(err.Error(), "no version 7") {
		t.Fatalf("a pin to a missing version: %v", err)
	}
}
