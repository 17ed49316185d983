package storetest

import (
	"net"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func testPower(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	seed(t, s)
	pc := mac("52:54:00:00:00:01")
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: pc, Name: "pc1"}))

	_, err := s.GetPower(c, pc)
	wantErr(t, err, inventory.ErrNotFound, "mac")

	bmc := inventory.PowerSettings{MAC: pc, Driver: "ipmi", Host: "10.0.0.9:623", User: "admin", Password: "s3cret pass"}
	if err := s.PutPower(c, bmc); err != nil {
		t.Fatal(err)
	}
	got := must[inventory.PowerSettings](t)(s.GetPower(c, pc))
	if got.Driver != "ipmi" || got.Host != bmc.Host || got.User != "admin" || got.Password != "s3cret pass" ||
		got.CipherSuite != inventory.DefaultCipherSuite || got.Source != inventory.SourceAPI {
		t.Fatalf("GetPower = %+v, want %+v with cipher suite 17 and source api", got, bmc)
	}

	// A put replaces every field.
	wol := inventory.PowerSettings{MAC: pc, Broadcast: net.ParseIP("10.1.2.255"), SecureOn: "11:22:33:44:55:66", Source: inventory.SourceConfig}
	if err := s.PutPower(c, wol); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	got = must[inventory.PowerSettings](t)(s.GetPower(c, pc))
	if got.Driver != "wol" || got.Host != "" || got.Password != "" || !got.Broadcast.Equal(net.ParseIP("10.1.2.255")) ||
		got.SecureOn != "11:22:33:44:55:66" || got.Source != inventory.SourceConfig {
		t.Fatalf("after replace and reopen GetPower = %+v, want wol to 10.1.2.255 with SecureOn, source config", got)
	}
	if l := must[[]inventory.PowerSettings](t)(s.ListPower(c)); len(l) != 1 || l[0].MAC.String() != pc.String() {
		t.Fatalf("ListPower = %+v, want pc1's settings only", l)
	}

	err = s.PutPower(c, inventory.PowerSettings{MAC: mac("52:54:00:00:00:99")})
	wantErr(t, err, inventory.ErrNotFound, "mac")
	err = s.PutPower(c, inventory.PowerSettings{MAC: pc, Driver: "ipmi", Host: "bmc", User: "u", CipherSuite: 42})
	wantErr(t, err, inventory.ErrInvalid, "cipher_suite")
	err = s.PutPower(c, inventory.PowerSettings{MAC: pc, Driver: "amt"})
	wantErr(t, err, inventory.ErrInvalid, "driver")

	// Removing the machine removes its settings.
	if err := s.DeleteMachine(c, pc); err != nil {
		t.Fatal(err)
	}
	if l := must[[]inventory.PowerSettings](t)(s.ListPower(c)); len(l) != 0 {
		t.Fatalf("ListPower after the machine's removal = %+v, want none", l)
	}
	if err := s.DeletePower(c, pc); err != nil {
		t.Fatalf("DeletePower of none = %v, want nil", err)
	}
}
