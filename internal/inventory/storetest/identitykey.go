package storetest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testIdentityKeyRace: servers starting for the first time at once on one
// store, each without a key file, end with one key accepted; every other
// server refuses, says to copy the key file, and keeps no key of its own.
// A later server with another key refuses; with the winner's, it serves.
func testIdentityKeyRace(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	const n = 4
	paths := make([]string, n)
	sealers := make([]*identitysvc.Sealer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		paths[i] = filepath.Join(t.TempDir(), "identity.key")
		wg.Add(1)
		go func() {
			defer wg.Done()
			sealers[i], errs[i] = identitysvc.OpenKey(c, s, paths[i])
		}()
	}
	wg.Wait()
	winner := -1
	for i := range n {
		_, statErr := os.Stat(paths[i])
		switch {
		case errs[i] == nil && winner >= 0:
			t.Fatalf("servers %d and %d both made an accepted identity key", winner, i)
		case errs[i] == nil:
			winner = i
			if statErr != nil {
				t.Fatalf("the winning server's key file: %v", statErr)
			}
		case !errors.Is(errs[i], identitysvc.ErrNoKey) || !strings.Contains(errs[i].Error(), "copy that server's identity.key_file to "+paths[i]):
			t.Fatalf("losing server %d: %v, want ErrNoKey saying what to copy where", i, errs[i])
		case !errors.Is(statErr, os.ErrNotExist):
			t.Fatalf("losing server %d kept its own key file (%v)", i, statErr)
		}
	}
	if winner < 0 {
		t.Fatalf("no server's key was accepted: %v", errs)
	}

	// The check value is durable, and only the winner's key passes it.
	s = b.Reopen(t, s)
	other := filepath.Join(t.TempDir(), "identity.key")
	if _, err := identitysvc.LoadKey(other, true); err != nil {
		t.Fatal(err)
	}
	if _, err := identitysvc.OpenKey(c, s, other); !errors.Is(err, identitysvc.ErrNoKey) || !strings.Contains(err.Error(), other+" is not the fleet's identity key") {
		t.Fatalf("a server with another key: %v, want ErrNoKey naming its file", err)
	}
	key, err := os.ReadFile(paths[winner])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, key, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := identitysvc.OpenKey(c, s, other)
	if err != nil || again.ID() != sealers[winner].ID() {
		t.Fatalf("a server with the fleet's key copied: %v", err)
	}

	// Host keys sealed before check values existed: a server without a
	// key file must not make a new one that would not open them.
	s2 := b.New(t)
	seed(t, s2)
	m := must[inventory.Machine](t)(s2.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:31")}))
	must[inventory.HostKeys](t)(s2.PutHostKeys(c, inventory.HostKeys{MAC: m.MAC, Public: []string{"ssh-ed25519 AAAA"}, Sealed: []byte{1}, KeyID: "0123456789abcdef"}, false))
	lost := filepath.Join(t.TempDir(), "identity.key")
	if _, err := identitysvc.OpenKey(c, s2, lost); !errors.Is(err, identitysvc.ErrNoKey) || !strings.Contains(err.Error(), "sealed with identity key 0123456789abcdef") {
		t.Fatalf("no key file with host keys sealed: %v, want ErrNoKey naming the sealing key", err)
	}
	if _, err := os.Stat(lost); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("made a key file while host keys were sealed by another (%v)", err)
	}
}
