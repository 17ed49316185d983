package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testImageCopies records copies for two servers, replaces one server's
// set, removes a copy, and reads the holders of a content joined with the
// servers table.
func testImageCopies(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 4, 1, 9, 0, 0, 123456789, time.UTC)
	shaX, shaY, shaZ := fmt.Sprintf("%064x", 1), fmt.Sprintf("%064x", 2), fmt.Sprintf("%064x", 3)
	for _, si := range []inventory.ServerInfo{{Name: "boot-a", Addrs: []string{"http://10.0.0.1:8080"}, Started: t0},
		{Name: "boot-b", Addrs: []string{"http://10.0.0.2:8080"}, Started: t0}} {
		if err := s.RegisterServer(c, si); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetImageCopies(c, "boot-a", []inventory.ImageCopy{{Server: "boot-a", SHA256: shaY, Since: t0}, {Server: "boot-a", SHA256: shaX, Since: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddImageCopy(c, inventory.ImageCopy{Server: "boot-b", SHA256: shaX, Since: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// Recording again keeps the first Since.
	if err := s.AddImageCopy(c, inventory.ImageCopy{Server: "boot-b", SHA256: shaX, Since: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// A server not registered yet (it records before its first heartbeat)
	// may hold copies; it is no holder until it registers.
	if err := s.AddImageCopy(c, inventory.ImageCopy{Server: "boot-c", SHA256: shaX, Since: t0}); err != nil {
		t.Fatal(err)
	}
	us := t0.Truncate(time.Microsecond)
	want := []inventory.ImageCopy{{Server: "boot-a", SHA256: shaX, Since: us}, {Server: "boot-b", SHA256: shaX, Since: us.Add(time.Minute)},
		{Server: "boot-c", SHA256: shaX, Since: us}, {Server: "boot-a", SHA256: shaY, Since: us}}
	got := must[[]inventory.ImageCopy](t)(s.ListImageCopies(c))
	if !copiesEqual(got, want) {
		t.Fatalf("ListImageCopies = %+v, want %+v", got, want)
	}
	holders := must[[]inventory.ServerInfo](t)(s.ImageHolders(c, shaX))
	if names := serverNames(holders); !reflect.DeepEqual(names, []string{"boot-a", "boot-b"}) || holders[1].Addrs[0] != "http://10.0.0.2:8080" {
		t.Fatalf("ImageHolders(X) = %+v, want boot-a and boot-b with their addresses", holders)
	}
	if h := must[[]inventory.ServerInfo](t)(s.ImageHolders(c, shaZ)); len(h) != 0 {
		t.Fatalf("ImageHolders(Z) = %+v, want none", h)
	}

	// A restart of boot-a finds only Z on disk.
	if err := s.SetImageCopies(c, "boot-a", []inventory.ImageCopy{{Server: "boot-a", SHA256: shaZ}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveImageCopy(c, "boot-b", shaX); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveImageCopy(c, "boot-b", shaX); err != nil {
		t.Fatalf("removing a copy twice: %v, want no error", err)
	}
	s = b.Reopen(t, s)
	got = must[[]inventory.ImageCopy](t)(s.ListImageCopies(c))
	if len(got) != 2 || got[0].Server != "boot-c" || got[0].SHA256 != shaX || got[1].Server != "boot-a" || got[1].SHA256 != shaZ {
		t.Fatalf("after replace, remove and reopen: %+v, want boot-c X and boot-a Z", got)
	}

	for _, tt := range []struct {
		name  string
		err   error
		field string
	}{
		{"bad sha", s.AddImageCopy(c, inventory.ImageCopy{Server: "boot-a", SHA256: "ABC"}), "sha256"},
		{"bad server", s.AddImageCopy(c, inventory.ImageCopy{Server: "no spaces", SHA256: shaX}), "server"},
		{"set names another server", s.SetImageCopies(c, "boot-a", []inventory.ImageCopy{{Server: "boot-b", SHA256: shaX}}), "server"},
	} {
		t.Run(tt.name, func(t *testing.T) { wantErr(t, tt.err, inventory.ErrInvalid, tt.field) })
	}
}

func copiesEqual(a, b []inventory.ImageCopy) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Server != b[i].Server || a[i].SHA256 != b[i].SHA256 || !a[i].Since.Equal(b[i].Since) {
			return false
		}
	}
	return true
}

func serverNames(l []inventory.ServerInfo) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = s.Name
	}
	return out
}
