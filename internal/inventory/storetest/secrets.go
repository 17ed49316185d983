package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func testSecrets(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	first, second := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if got := must[[]byte](t)(s.Secret(c, "nbd-base", first)); !bytes.Equal(got, first) {
		t.Fatalf("first Secret = %x, want the fresh value %x", got, first)
	}
	// A later caller, another server, gets the stored value, not its own.
	if got := must[[]byte](t)(s.Secret(c, "nbd-base", second)); !bytes.Equal(got, first) {
		t.Fatalf("second Secret = %x, want the stored %x", got, first)
	}
	if got := must[[]byte](t)(s.Secret(c, "other", second)); !bytes.Equal(got, second) {
		t.Fatalf("Secret of another name = %x, want %x", got, second)
	}
	s = b.Reopen(t, s)
	if got := must[[]byte](t)(s.Secret(c, "nbd-base", second)); !bytes.Equal(got, first) {
		t.Fatalf("after reopen Secret = %x, want %x", got, first)
	}

	// Servers starting together agree on one value.
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.Secret(c, "raced", bytes.Repeat([]byte{byte(10 + i)}, 16))
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("racing Secret %d = %x, %v; want every caller to get %x", i, got[i], errs[i], got[0])
		}
	}

	bad := []struct {
		name  string
		fresh []byte
		field string
	}{
		{"Upper", first, "name"},
		{"", first, "name"},
		{"short", []byte("0123456789"), "secret"},
	}
	for _, tt := range bad {
		_, err := s.Secret(c, tt.name, tt.fresh)
		wantErr(t, err, inventory.ErrInvalid, tt.field)
	}
}
