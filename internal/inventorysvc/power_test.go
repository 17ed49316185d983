package inventorysvc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func TestApplyPowerFromConfig(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	pw := filepath.Join(t.TempDir(), "bmc-pass")
	os.WriteFile(pw, []byte("from-a-file\n"), 0o600)
	c := fullConfig(t, `
machines:
  - {mac: "52:54:00:00:00:01", name: pc1, power: {driver: ipmi, host: "10.0.0.9:623", user: admin, password_file: `+pw+`, cipher_suite: 3}}
  - {mac: "52:54:00:00:00:02", name: pc2, power: {broadcast: 10.1.2.255}}
  - {mac: "52:54:00:00:00:03", name: pc3}
`)
	if _, err := ApplyConfig(ctx, st, c); err != nil {
		t.Fatal(err)
	}
	p1, err := st.GetPower(ctx, mac("52:54:00:00:00:01"))
	if err != nil || p1.Password != "from-a-file" || p1.CipherSuite != 3 || p1.Source != inventory.SourceConfig {
		t.Fatalf("pc1 power %v, %v; want ipmi with the file's password, suite 3, source config", p1, err)
	}
	p2, err := st.GetPower(ctx, mac("52:54:00:00:00:02"))
	if err != nil || p2.Driver != "wol" || p2.Broadcast.String() != "10.1.2.255" {
		t.Fatalf("pc2 power %v, %v; want wol to 10.1.2.255", p2, err)
	}
	// pc3's settings come from the API and outlive a restart.
	if err := st.PutPower(ctx, inventory.PowerSettings{MAC: mac("52:54:00:00:00:03"), Driver: "none"}); err != nil {
		t.Fatal(err)
	}
	c.Machines[1].Power = nil
	if _, err := ApplyConfig(ctx, st, c); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetPower(ctx, mac("52:54:00:00:00:02")); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("pc2's power after its removal from the config: %v, want none", err)
	}
	if p3, err := st.GetPower(ctx, mac("52:54:00:00:00:03")); err != nil || p3.Driver != "none" {
		t.Errorf("pc3's API settings after a restart: %v, %v; want kept", p3, err)
	}

	for _, tt := range []struct{ yaml, key string }{
		{`{driver: ipmi, host: bmc, user: admin, password_file: /nonexistent/pw}`, "machines[0].power.password_file"},
		{`{driver: ipmi, host: bmc, user: admin, cipher_suite: 18}`, "machines[0].power.cipher_suite"},
		{`{driver: amt}`, "machines[0].power.driver"},
	} {
		bad := fullConfig(t, "machines:\n  - {mac: \"52:54:00:00:00:01\", power: "+tt.yaml+"}\n")
		_, err := ApplyConfig(ctx, st, bad)
		if err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("power %s: %v; want an error naming %s", tt.yaml, err, tt.key)
		}
	}
}
