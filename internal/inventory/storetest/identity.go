package storetest

import (
	"bytes"
	"reflect"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testMachineID: a machine gets its machine-id when it is added, keeps it
// through updates and status changes, and a machine removed and added
// again gets a new one.
func testMachineID(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	a := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1"}))
	d := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:02"), State: inventory.StateDiscovered}))
	for _, m := range []inventory.Machine{a, d} {
		if why := inventory.CheckMachineID(m.MachineID); why != "" {
			t.Fatalf("%v: machine-id %q: %s", m, m.MachineID, why)
		}
	}
	if a.MachineID == d.MachineID {
		t.Fatalf("two machines share machine-id %s", a.MachineID)
	}
	upd := a
	upd.MachineID, upd.Profile = "", "linux" // an update that does not say keeps it
	if got := must[inventory.Machine](t)(s.UpdateMachine(c, upd)); got.MachineID != a.MachineID {
		t.Fatalf("after UpdateMachine machine-id %s, want %s kept", got.MachineID, a.MachineID)
	}
	if err := s.SetStatus(c, a.MAC, inventory.StateBooted, a.LastBoot, nil); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	if got := must[inventory.Machine](t)(s.GetMachine(c, a.MAC)); got.MachineID != a.MachineID {
		t.Fatalf("after reopen machine-id %s, want %s", got.MachineID, a.MachineID)
	}
	if err := s.DeleteMachine(c, a.MAC); err != nil {
		t.Fatal(err)
	}
	again := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: a.MAC, Name: "pc1"}))
	if again.MachineID == a.MachineID || inventory.CheckMachineID(again.MachineID) != "" {
		t.Fatalf("machine added again got machine-id %q, want a new one (old %s)", again.MachineID, a.MachineID)
	}
	_, err := s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:03"), MachineID: "xyz"})
	wantErr(t, err, inventory.ErrInvalid, "machine_id")
}

func testHostKeys(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	m := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1"}))
	_, err := s.HostKeys(c, m.MAC)
	wantErr(t, err, inventory.ErrNotFound, "mac")
	_, err = s.PutHostKeys(c, inventory.HostKeys{MAC: mac("52:54:00:00:00:09"), Public: []string{"ssh-ed25519 AAAA"}, Sealed: []byte{1}, KeyID: "k"}, false)
	wantErr(t, err, inventory.ErrNotFound, "mac")
	_, err = s.PutHostKeys(c, inventory.HostKeys{MAC: m.MAC, Public: []string{"ssh-ed25519 AAAA\nx"}, Sealed: []byte{1}, KeyID: "k"}, false)
	wantErr(t, err, inventory.ErrInvalid, "host_keys")

	first := inventory.HostKeys{MAC: m.MAC, Public: []string{"ssh-ed25519 AAAA1", "ecdsa-sha2-nistp256 AAAA1"}, Sealed: []byte("sealed-1"), KeyID: "key-a"}
	second := inventory.HostKeys{MAC: m.MAC, Public: []string{"ssh-ed25519 AAAA2"}, Sealed: []byte("sealed-2"), KeyID: "key-a"}
	got := must[inventory.HostKeys](t)(s.PutHostKeys(c, first, false))
	if !reflect.DeepEqual(got.Public, first.Public) || !bytes.Equal(got.Sealed, first.Sealed) || got.KeyID != "key-a" || got.Created.IsZero() {
		t.Fatalf("PutHostKeys = %+v, want %+v with a creation time", got, first)
	}
	// Without replace the stored keys win; with replace (rekey) they go.
	if got := must[inventory.HostKeys](t)(s.PutHostKeys(c, second, false)); !bytes.Equal(got.Sealed, first.Sealed) {
		t.Fatalf("PutHostKeys without replace stored %q, want the first keys kept", got.Sealed)
	}
	if got := must[inventory.HostKeys](t)(s.PutHostKeys(c, second, true)); !bytes.Equal(got.Sealed, second.Sealed) || len(got.Public) != 1 {
		t.Fatalf("PutHostKeys with replace = %+v, want the second keys", got)
	}
	s = b.Reopen(t, s)
	if got := must[inventory.HostKeys](t)(s.HostKeys(c, m.MAC)); !bytes.Equal(got.Sealed, second.Sealed) {
		t.Fatalf("after reopen HostKeys = %q, want %q", got.Sealed, second.Sealed)
	}
	list := must[[]inventory.HostKeys](t)(s.ListHostKeys(c))
	if len(list) != 1 || list[0].Sealed != nil || list[0].Public[0] != "ssh-ed25519 AAAA2" {
		t.Fatalf("ListHostKeys = %+v, want one machine's public keys and no sealed keys", list)
	}

	// Servers making a machine's keys at once all get one set.
	n := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:02")}))
	var wg sync.WaitGroup
	res := make([]inventory.HostKeys, 6)
	errs := make([]error, 6)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = s.PutHostKeys(c, inventory.HostKeys{MAC: n.MAC, Public: []string{"ssh-ed25519 X"},
				Sealed: []byte{byte(i + 1)}, KeyID: "key-a"}, false)
		}()
	}
	wg.Wait()
	for i := range res {
		if errs[i] != nil || !bytes.Equal(res[i].Sealed, res[0].Sealed) {
			t.Fatalf("racing PutHostKeys %d = %x, %v; want every caller to get %x", i, res[i].Sealed, errs[i], res[0].Sealed)
		}
	}

	// The keys go with their machine.
	if err := s.DeleteMachine(c, m.MAC); err != nil {
		t.Fatal(err)
	}
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: m.MAC}))
	_, err = s.HostKeys(c, m.MAC)
	wantErr(t, err, inventory.ErrNotFound, "mac")
}
