package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/power/schedule"
)

type cliDriver struct{}

func (cliDriver) Do(_ context.Context, t power.Target, a power.Action) (power.State, error) {
	switch {
	case t.Machine.Name == "pc3":
		return "", errors.New("ipmi: no answer from 10.0.0.13")
	case t.Settings.Driver == inventory.DriverWOL:
		return power.StateSent, nil
	case a == power.Off:
		return power.StateOff, nil
	}
	return power.StateOn, nil
}

func powerServer(t *testing.T) string {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &power.Runner{Drivers: map[string]power.Driver{"wol": cliDriver{}, "ipmi": cliDriver{}}}
	h, err := api.New(api.Config{Store: st, Token: testToken, Power: r})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for i, n := range []string{"pc1", "pc2", "pc3"} {
		if _, err := st.CreateMachine(context.Background(), inventory.Machine{MAC: []byte{0x52, 0x54, 0, 0, 0, byte(i + 1)}, Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	return srv.URL
}

func TestMachinePowerKeepsPasswordSecret(t *testing.T) {
	url := powerServer(t)
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("very-secret-bmc\n"), 0o600)
	out := run(t, "machine", "power", "pc2", "--driver", "ipmi", "--host", "10.0.0.12", "--user", "admin", "--password-file", pw, "--server", url, "--token", testToken)
	if strings.Contains(out, "very-secret-bmc") || !strings.Contains(out, "(set)") || !strings.Contains(out, "17") {
		t.Fatalf("set printed %q; want the settings with password (set) and cipher suite 17", out)
	}
	out = run(t, "machine", "power", "pc2", "-o", "json", "--server", url, "--token", testToken)
	var got api.PowerSettings
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Driver != "ipmi" || got.Host != "10.0.0.12" {
		t.Fatalf("show -o json printed %q (%v); want ipmi at 10.0.0.12", out, err)
	}
	out = run(t, "machine", "power", "pc2", "--clear", "--server", url, "--token", testToken)
	if !strings.Contains(out, "wol") {
		t.Fatalf("--clear printed %q; want driver wol", out)
	}
}

func TestPowerCommand(t *testing.T) {
	url := powerServer(t)
	run(t, "machine", "power", "pc2", "--driver", "ipmi", "--host", "10.0.0.12", "--user", "admin", "--server", url, "--token", testToken)
	run(t, "machine", "power", "pc3", "--driver", "ipmi", "--host", "10.0.0.13", "--user", "admin", "--server", url, "--token", testToken)

	out := run(t, "power", "on", "pc1", "pc2", "--wave", "1/1ms", "--server", url, "--token", testToken)
	for _, want := range []string{"power: wave 1/2: 1 machines", "power: wave 2/2: 1 machines", "pc1   52:54:00:00:00:01  wol     1     sent", "pc2   52:54:00:00:00:02  ipmi    2     on"} {
		if !strings.Contains(out, want) {
			t.Errorf("power on printed:\n%s\nwant a line with %q", out, want)
		}
	}
	out = run(t, "power", "status", "--all", "-o", "json", "--server", url, "--token", testToken)
	if !strings.Contains(out, "error: status failed on 1 of 3 machines") || !strings.Contains(out, `"error": "ipmi: no answer from 10.0.0.13"`) {
		t.Errorf("status --all printed:\n%s\nwant every machine in JSON and an error for pc3", out)
	}
	for _, args := range [][]string{{"power", "on"}, {"power", "on", "pc1", "--all"}, {"power", "on", "--all", "--wave", "3"}} {
		if out := run(t, append(args, "--server", url, "--token", testToken)...); !strings.HasPrefix(out, "error: ") {
			t.Errorf("%v printed %q, want an error", args, out)
		}
	}
}

func TestMachineNextBoot(t *testing.T) {
	url := powerServer(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pc1"}, "pc1: no next boot override"},
		{[]string{"pc1", "local"}, "pc1: next network boot: local (once)"},
		{[]string{"pc1"}, "pc1: next network boot: local (once)"},
		{[]string{"pc1", "--clear"}, "pc1: next boot override removed"},
		{[]string{"pc1", "nope"}, `error: target: no profile named "nope"`},
		{[]string{"pc1", "maintenance"}, "error: target: no maintenance_profile"},
		{[]string{"pc1", "local", "--clear"}, "error: give a target or --clear"},
	} {
		out := run(t, append([]string{"machine", "next-boot"}, append(tt.args, "--server", url, "--token", testToken)...)...)
		if !strings.Contains(out, tt.want) {
			t.Errorf("machine next-boot %v printed %q, want %q", tt.args, out, tt.want)
		}
	}
}

func TestScheduleCommands(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sched, err := schedule.New(schedule.Config{Runner: &power.Runner{}, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Token: testToken, Schedules: sched})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn := []string{"--server", srv.URL, "--token", testToken}
	out := run(t, append([]string{"power", "schedules", "add", "night", "--at", "0 22 * * *", "--action", "off", "--all"}, conn...)...)
	if !strings.Contains(out, `schedule night: off at "0 22 * * *"`) {
		t.Errorf("schedules add printed %q", out)
	}
	out = run(t, append([]string{"power", "schedules", "add", "bad", "--at", "22h", "--action", "off", "--all"}, conn...)...)
	if !strings.Contains(out, "error: at: want a cron expression") {
		t.Errorf("schedules add of a bad expression printed %q, want the refusal", out)
	}
	if got, _ := st.ListSchedules(context.Background()); len(got) != 1 || got[0].Name != "night" {
		t.Errorf("stored %+v, want night", got)
	}
	out = run(t, append([]string{"power", "schedules", "rm", "night"}, conn...)...)
	if !strings.Contains(out, "schedule night removed") {
		t.Errorf("schedules rm printed %q", out)
	}
}
