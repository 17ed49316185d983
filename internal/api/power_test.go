package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/power/schedule"
)

const bmcPassword = "hunter2-bmc-PASSWORD"

type stubDriver struct{}

func (stubDriver) Do(_ context.Context, t power.Target, a power.Action) (power.State, error) {
	if t.Machine.Name == "pc-bad" {
		return "", errors.New("ipmi: authentication refused")
	}
	if t.Settings.Driver == inventory.DriverWOL {
		return power.StateSent, nil
	}
	return power.StateOn, nil
}

func powerEnv(t *testing.T) *env {
	r := &power.Runner{Drivers: map[string]power.Driver{"wol": stubDriver{}, "ipmi": stubDriver{}},
		After: func(time.Duration) <-chan time.Time { // waves at once
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		}}
	e := newEnv(t, false, func(c *Config) { c.Power = r })
	for _, m := range []string{`{"mac":"52:54:00:00:00:01","name":"pc1"}`, `{"mac":"52:54:00:00:00:02","name":"pc2"}`, `{"mac":"52:54:00:00:00:03","name":"pc-bad"}`} {
		e.mustDo(t, "POST", "/machines", m, http.StatusCreated, nil)
	}
	return e
}

// TestPowerSettingsSecrets: the BMC password is stored for the driver but
// appears in no answer, event or audit entry.
func TestPowerSettingsSecrets(t *testing.T) {
	e := powerEnv(t)
	var got PowerSettings
	e.mustDo(t, "GET", "/machines/pc1/power", "", http.StatusOK, &got)
	if got.Driver != "wol" {
		t.Fatalf("default settings %+v, want driver wol", got)
	}
	e.mustDo(t, "PUT", "/machines/pc1/power", `{"driver":"ipmi","host":"10.0.0.9","user":"admin","password":"`+bmcPassword+`"}`, http.StatusOK, &got)
	if got.Password == nil || *got.Password != inventory.Hidden || got.CipherSuite != 17 {
		t.Fatalf("PUT answered %+v, want password (set) and cipher suite 17", got)
	}
	// Changing the host keeps the password.
	e.mustDo(t, "PUT", "/machines/pc1/power", `{"driver":"ipmi","host":"10.0.0.10","user":"admin"}`, http.StatusOK, &got)
	stored, err := e.store.GetPower(context.Background(), mustMAC(t, "52:54:00:00:00:01"))
	if err != nil || stored.Password != bmcPassword || stored.Host != "10.0.0.10" {
		t.Fatalf("stored %+v, %v; want the new host and the old password", stored.Redacted(), err)
	}
	e.mustDo(t, "PUT", "/machines/pc1/power", `{"driver":"ipmi","host":"bmc","user":"admin","cipher_suite":99}`, http.StatusBadRequest, nil)
	// Back to Wake-on-LAN: the BMC's password goes with the BMC.
	e.mustDo(t, "PUT", "/machines/pc2/power", `{"driver":"ipmi","host":"10.0.0.11","user":"admin","password":"x"}`, http.StatusOK, nil)
	e.mustDo(t, "PUT", "/machines/pc2/power", `{"driver":"wol"}`, http.StatusOK, &got)
	if got.Driver != "wol" || got.Password != nil {
		t.Fatalf("ipmi to wol answered %+v, want wol without a password", got)
	}
	e.mustDo(t, "PUT", "/machines/pc1/power", `{"driver":"ipmi","password":"`+bmcPassword+`","typo":1}`, http.StatusBadRequest, nil)
	e.mustDo(t, "PUT", "/machines/pc-cfg/power", `{"driver":"wol"}`, http.StatusOK, nil)

	var audit AuditList
	e.mustDo(t, "GET", "/audit", "", http.StatusOK, &audit)
	var events EventList
	e.mustDo(t, "GET", "/events", "", http.StatusOK, &events)
	b, _ := json.Marshal([]any{audit, events, got})
	if strings.Contains(string(b), bmcPassword) {
		t.Fatalf("the BMC password leaked into an answer, the audit trail or events: %s", b)
	}
	if !strings.Contains(string(b), "host=10.0.0.10") {
		t.Fatalf("audit and events do not describe the settings: %s", b)
	}
}

func mustMAC(t *testing.T, s string) []byte {
	hw, err := inventory.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return hw
}

// TestPowerRun streams waves and per-machine results; one machine's
// failure is its own line.
func TestPowerRun(t *testing.T) {
	e := powerEnv(t)
	e.mustDo(t, "PUT", "/machines/pc2/power", `{"driver":"ipmi","host":"10.0.0.9","user":"admin","password":"x"}`, http.StatusOK, nil)
	e.mustDo(t, "PUT", "/machines/pc-bad/power", `{"driver":"ipmi","host":"10.0.0.8","user":"admin","password":"x"}`, http.StatusOK, nil)
	req, _ := http.NewRequest("POST", e.srv.URL+Prefix+"/power", strings.NewReader(`{"action":"on","machines":["pc1","pc2","52:54:00:00:00:03"],"wave":"2/5s"}`))
	req.Header.Set("Authorization", bearer)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, type %q; want 200 JSON lines", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l PowerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		switch l.Type {
		case "wave":
			lines = append(lines, "wave")
		case "result":
			lines = append(lines, l.Name+":"+l.State+":"+l.Error)
		case "done":
			lines = append(lines, "done")
			if l.Size != 3 || l.Failed != 1 {
				t.Errorf("done line %+v, want 3 machines, 1 failed", l)
			}
		}
	}
	want := "wave pc1:sent: pc2:on: wave pc-bad::ipmi: authentication refused done"
	// Within wave 1 the two results may come in either order.
	got := strings.Join(lines, " ")
	if got != want && got != strings.Replace(want, "pc1:sent: pc2:on:", "pc2:on: pc1:sent:", 1) {
		t.Fatalf("stream %q, want %q", got, want)
	}
	var events EventList
	e.mustDo(t, "GET", "/events", "", http.StatusOK, &events)
	n := 0
	for _, ev := range events.Events {
		if ev.Kind == "power" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d power events, want one per machine", n)
	}
	var audit AuditList
	e.mustDo(t, "GET", "/audit", "", http.StatusOK, &audit)
	if a := audit.Entries[0]; a.Route != "POST /power" || !strings.Contains(a.Summary, "3 machines, 1 failed") {
		t.Errorf("latest audit entry %+v, want POST /power with its outcome", a)
	}

	for _, body := range []string{
		`{"action":"boot","all":true}`,
		`{"action":"on"}`,
		`{"action":"on","all":true,"profile":"cfgprof"}`,
		`{"action":"on","all":true,"wave":"2"}`,
	} {
		e.mustDo(t, "POST", "/power", body, http.StatusBadRequest, nil)
	}
	e.mustDo(t, "POST", "/power", `{"action":"on","machines":["nope"]}`, http.StatusNotFound, nil)
}

// TestNextBootAPI: set, show, maintenance resolved to the config's
// profile, refused targets, remove.
func TestNextBootAPI(t *testing.T) {
	e := newEnv(t, false, func(c *Config) { c.MaintenanceProfile = "cfgprof" })
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, http.StatusCreated, nil)
	var nb NextBoot
	e.mustDo(t, "PUT", "/machines/pc1/next-boot", `{"target":"maintenance"}`, http.StatusOK, &nb)
	if nb.Target != "cfgprof" {
		t.Fatalf("next-boot maintenance stored %q, want the maintenance profile cfgprof", nb.Target)
	}
	e.mustDo(t, "PUT", "/machines/pc1/next-boot", `{"target":"local"}`, http.StatusOK, &nb)
	e.mustDo(t, "GET", "/machines/pc1/next-boot", "", http.StatusOK, &nb)
	if nb.Target != "local" {
		t.Fatalf("next-boot shows %q, want local", nb.Target)
	}
	e.mustDo(t, "PUT", "/machines/pc1/next-boot", `{"target":"nope"}`, http.StatusBadRequest, nil)
	e.mustDo(t, "PUT", "/machines/pc1/next-boot", `{"target":""}`, http.StatusBadRequest, nil)
	e.mustDo(t, "DELETE", "/machines/pc1/next-boot", "", http.StatusNoContent, nil)
	e.mustDo(t, "GET", "/machines/pc1/next-boot", "", http.StatusOK, &nb)
	if nb.Target != "" {
		t.Fatalf("after DELETE next-boot shows %q, want none", nb.Target)
	}
	plain := newEnv(t, false)
	plain.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, http.StatusCreated, nil)
	plain.mustDo(t, "PUT", "/machines/pc1/next-boot", `{"target":"maintenance"}`, http.StatusBadRequest, nil)
}

func TestSchedulesAPI(t *testing.T) {
	var sched *schedule.Scheduler
	e := newEnv(t, false, func(c *Config) {
		entries, err := schedule.FromConfig([]config.Schedule{{Name: "from-file", At: "0 22 * * *", Action: "off", All: true}})
		if err != nil {
			t.Fatal(err)
		}
		sched, err = schedule.New(schedule.Config{Entries: entries, Runner: &power.Runner{}, Store: c.Store})
		if err != nil {
			t.Fatal(err)
		}
		c.Schedules = sched
	})
	e.mustDo(t, "POST", "/schedules", `{"name":"lab-morning","at":"30 7 * * 1-5","action":"on","profile":"cfgprof","wave":"20/10s"}`, http.StatusOK, nil)
	e.mustDo(t, "POST", "/schedules", `{"name":"from-file","at":"0 1 * * *","action":"on","all":true}`, http.StatusConflict, nil)
	var eb ErrorBody
	e.mustDo(t, "POST", "/schedules", `{"name":"x","at":"every morning","action":"on","all":true}`, http.StatusBadRequest, &eb)
	if eb.Field != "at" {
		t.Errorf("bad expression refused naming %q, want at", eb.Field)
	}
	e.mustDo(t, "POST", "/schedules", `{"name":"x","at":"0 1 * * *","action":"status","all":true}`, http.StatusBadRequest, nil)
	stored, err := e.store.ListSchedules(context.Background())
	if err != nil || len(stored) != 1 || stored[0].Wave != "20/10s" {
		t.Fatalf("stored schedules %+v, %v; want lab-morning only", stored, err)
	}
	var l ScheduleList
	e.mustDo(t, "GET", "/schedules", "", http.StatusOK, &l)
	if len(l.Schedules) != 1 || l.Schedules[0].Source != "config" || l.Schedules[0].Next == nil {
		t.Errorf("GET /schedules %+v, want the config's with its next run (the scheduler reads stored ones as it runs)", l)
	}
	e.mustDo(t, "DELETE", "/schedules/from-file", "", http.StatusConflict, nil)
	e.mustDo(t, "DELETE", "/schedules/lab-morning", "", http.StatusNoContent, nil)
	e.mustDo(t, "DELETE", "/schedules/lab-morning", "", http.StatusNotFound, nil)
}
