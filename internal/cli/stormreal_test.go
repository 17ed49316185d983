package cli

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// bootsAfterPower is a BootSource whose machines boot, complete, as soon
// as they are powered on: the records a real storm follows.
type bootsAfterPower struct {
	mu    sync.Mutex
	boots []telemetry.Boot
}

func (b *bootsAfterPower) powered(mac string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now().UTC()
	end := now.Add(2 * time.Second)
	b.boots = append(b.boots, telemetry.Boot{ID: mac, MAC: mac, Start: now.Add(time.Second), End: &end, State: telemetry.StateComplete,
		Power:  &telemetry.PowerCause{Time: now, Action: "on", Cause: "api:admin"},
		Phases: []telemetry.Phase{{Kind: "dhcp", Start: now.Add(time.Second), Secs: 0.5}, {Kind: "complete", Start: end}}})
}

func (b *bootsAfterPower) Boots(context.Context, telemetry.Filter) ([]telemetry.Boot, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]telemetry.Boot(nil), b.boots...), nil
}

func (b *bootsAfterPower) Boot(context.Context, string) (telemetry.Boot, bool, error) {
	return telemetry.Boot{}, false, nil
}

type bootingDriver struct{ boots *bootsAfterPower }

func (d bootingDriver) Do(_ context.Context, t power.Target, _ power.Action) (power.State, error) {
	if t.Machine.Name == "lab3" {
		return "", context.DeadlineExceeded
	}
	d.boots.powered(t.Machine.MAC.String())
	return power.StateSent, nil
}

func TestStormReal(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	st.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "/k"})
	for i, n := range []string{"lab1", "lab2", "lab3"} {
		st.CreateMachine(ctx, inventory.Machine{MAC: []byte{0x52, 0x54, 0, 0, 0, byte(i + 1)}, Name: n, Profile: "lab"})
	}
	boots := &bootsAfterPower{}
	h, err := api.New(api.Config{Store: st, Token: testToken, Boots: boots,
		Power: &power.Runner{Drivers: map[string]power.Driver{"wol": bootingDriver{boots}}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	out := run(t, "storm", "--real", "lab", "--wave", "2/1ms", "--server", srv.URL, "--token", testToken)
	for _, want := range []string{"dhcp", "boot", "3 real machines on profile lab: 2 booted, 1 failed", "power: wol: no answer within", "error: 1 of 3 machines failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("storm --real printed:\n%s\nwant %q", out, want)
		}
	}
}
