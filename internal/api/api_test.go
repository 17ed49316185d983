package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
)

const token = "0123456789abcdef0123456789abcdef"

// The config owns pc-cfg and profile cfgprof; the API may not change them.
const cfgYAML = `
dhcp: {mode: off}
server_ip: 10.0.0.1
profiles:
  cfgprof: {kernel: /k}
machines:
  - {mac: "52:54:00:cc:00:01", name: pc-cfg, profile: cfgprof}
`

type env struct {
	srv     *httptest.Server
	store   inventory.Store
	changes atomic.Int32
}

func newEnv(t *testing.T, openReads bool, opts ...func(*Config)) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := config.Parse(strings.NewReader(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inventorysvc.ApplyConfig(context.Background(), st, c); err != nil {
		t.Fatal(err)
	}
	e := &env{store: st}
	cfg := Config{Store: st, Token: token, OpenReads: openReads, OnChange: func() { e.changes.Add(1) },
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request with the token (auth "" means none) and decodes the
// JSON answer into out when out is non-nil.
func (e *env) do(t *testing.T, method, path, auth, body string, out any) (int, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+Prefix+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s %s: Content-Type %q, body %q; want JSON", method, path, resp.Header.Get("Content-Type"), b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %q", method, path, err, b)
		}
	}
	return resp.StatusCode, resp.Header
}

const bearer = "Bearer " + token

func (e *env) mustDo(t *testing.T, method, path, body string, want int, out any) http.Header {
	t.Helper()
	var eb ErrorBody
	if out == nil {
		out = &eb
	}
	// Decode into a zero value: json merges maps into existing ones.
	reflect.ValueOf(out).Elem().SetZero()
	got, h := e.do(t, method, path, bearer, body, out)
	if got != want {
		t.Fatalf("%s %s %s: status %d (%+v), want %d", method, path, body, got, out, want)
	}
	return h
}

func TestErrors(t *testing.T) {
	e := newEnv(t, false)
	e.mustDo(t, "POST", "/profiles", `{"name":"linux","kernel":"/vmlinuz"}`, 201, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1","profile":"linux","ip":"10.0.0.50"}`, 201, nil)
	big := `{"mac":"52:54:00:00:00:09","name":"` + strings.Repeat("a", MaxBody) + `"}`
	tests := []struct {
		name, method, path, auth, body string
		status                         int
		field, msg                     string // msg: a substring of the error
	}{
		{"no token", "POST", "/machines", "", `{"mac":"52:54:00:00:00:02"}`, 401, "", "missing Authorization"},
		{"wrong token", "POST", "/machines", "Bearer " + strings.Repeat("x", 32), `{}`, 401, "", "unknown or revoked token"},
		{"short token", "DELETE", "/machines/pc1", "Bearer x", ``, 401, "", "unknown or revoked token"},
		{"basic auth", "POST", "/machines", "Basic dXNlcjpwYXNz", `{}`, 401, "", "want Authorization: Bearer"},
		{"read needs token", "GET", "/machines", "", ``, 401, "", "missing Authorization"},
		{"empty body", "POST", "/machines", bearer, ``, 400, "", "empty"},
		{"not JSON", "POST", "/machines", bearer, `{"mac":`, 400, "", "not valid JSON"},
		{"trailing data", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02"} {}`, 400, "", "after the JSON value"},
		{"unknown field", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","colour":"red"}`, 400, "colour", "unknown field"},
		{"wrong type", "POST", "/machines", bearer, `{"mac":52}`, 400, "mac", "want a JSON string"},
		{"missing MAC", "POST", "/machines", bearer, `{"name":"pc2"}`, 400, "mac", "required"},
		{"bad MAC", "POST", "/machines", bearer, `{"mac":"52:54:00"}`, 400, "mac", "Ethernet MAC"},
		{"bad IP", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","ip":"10.0.0"}`, 400, "ip", "IPv4"},
		{"bad name", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","name":"a b"}`, 400, "name", "host name"},
		{"name not RFC 1123", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","name":"pc1.-lab"}`, 400, "name", `"pc1.-lab" is not a host name (RFC 1123): label "-lab" starts or ends with a hyphen`},
		{"bad label", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","labels":{"a b":"c"}}`, 400, "labels", "label key"},
		{"unknown profile", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","profile":"nope"}`, 400, "profile", "no profile named"},
		{"duplicate MAC", "POST", "/machines", bearer, `{"mac":"52-54-00-00-00-01"}`, 409, "mac", "already exists"},
		{"duplicate name", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","name":"pc1"}`, 409, "name", "already the name of"},
		{"duplicate IP", "POST", "/machines", bearer, `{"mac":"52:54:00:00:00:02","ip":"10.0.0.50"}`, 409, "ip", "already reserved"},
		{"too large", "POST", "/machines", bearer, big, 413, "", "over"},
		{"bad path MAC", "GET", "/machines/zz:zz", bearer, ``, 400, "mac", "want a MAC"},
		{"unknown MAC", "GET", "/machines/52:54:00:00:00:99", bearer, ``, 404, "mac", "no machine"},
		{"unknown name", "GET", "/machines/pc9", bearer, ``, 404, "mac", "no machine with MAC or name"},
		{"bad state filter", "GET", "/machines?state=asleep", bearer, ``, 400, "state", "want one of"},
		{"unknown query", "GET", "/machines?colour=red", bearer, ``, 400, "colour", "unknown query parameter"},
		{"bad label filter", "GET", "/machines?label=room", bearer, ``, 400, "label", "key=value"},
		{"PUT other MAC", "PUT", "/machines/pc1", bearer, `{"mac":"52:54:00:00:00:03"}`, 400, "mac", "differs"},
		{"PUT unknown", "PUT", "/machines/52:54:00:00:00:99", bearer, `{}`, 404, "mac", "no machine"},
		{"PUT config machine", "PUT", "/machines/pc-cfg", bearer, `{"profile":"linux"}`, 409, "mac", "config file"},
		{"PATCH config machine", "PATCH", "/machines/52:54:00:cc:00:01", bearer, `{"profile":"linux"}`, 409, "mac", "config file"},
		{"PATCH bad state", "PATCH", "/machines/pc1", bearer, `{"state":"asleep"}`, 400, "state", "want one of"},
		{"PATCH unknown profile", "PATCH", "/machines/pc1", bearer, `{"profile":"nope"}`, 400, "profile", "no profile"},
		{"PATCH bad IP", "PATCH", "/machines/pc1", bearer, `{"ip":"::1"}`, 400, "ip", "IPv4"},
		{"PATCH unknown field", "PATCH", "/machines/pc1", bearer, `{"mac":"52:54:00:00:00:07"}`, 400, "mac", "unknown field"},
		{"DELETE unknown", "DELETE", "/machines/52:54:00:00:00:99", bearer, ``, 404, "mac", "no machine"},
		{"DELETE config machine", "DELETE", "/machines/pc-cfg", bearer, ``, 409, "mac", "config file"},
		{"profile without kernel", "POST", "/profiles", bearer, `{"name":"x"}`, 400, "kernel", "required"},
		{"profile kernel and root kernel", "POST", "/profiles", bearer, `{"name":"x","kernel":"/k","root_image":"d","root_kernel":"image"}`, 400, "kernel", "must be empty when root_kernel is image"},
		{"profile bad root kernel", "POST", "/profiles", bearer, `{"name":"x","kernel":"/k","root_image":"d","root_kernel":"own"}`, 400, "root_kernel", "want image"},
		{"profile bad name", "POST", "/profiles", bearer, `{"name":"a/b","kernel":"/k"}`, 400, "name", "profile name"},
		{"profile bad template", "POST", "/profiles", bearer, `{"name":"x","kernel":"/k","cmdline":"host={{.Nmae}}"}`, 400, "cmdline", "Nmae"},
		{"profile broken template", "POST", "/profiles", bearer, `{"name":"x","kernel":"/k","cmdline":"{{"}`, 400, "cmdline", "template"},
		{"duplicate profile", "POST", "/profiles", bearer, `{"name":"linux","kernel":"/k"}`, 409, "name", "already exists"},
		{"profile rename", "PUT", "/profiles/linux", bearer, `{"name":"other","kernel":"/k"}`, 400, "name", "cannot be renamed"},
		{"PUT unknown profile", "PUT", "/profiles/nope", bearer, `{"kernel":"/k"}`, 404, "name", "no profile"},
		{"PUT config profile", "PUT", "/profiles/cfgprof", bearer, `{"kernel":"/k2"}`, 409, "name", "config file"},
		{"DELETE profile in use", "DELETE", "/profiles/linux", bearer, ``, 409, "name", "used by 1 machine(s) (pc1)"},
		{"DELETE config profile", "DELETE", "/profiles/cfgprof", bearer, ``, 409, "name", "config file"},
		{"DELETE unknown profile", "DELETE", "/profiles/nope", bearer, ``, 404, "name", "no profile"},
		{"events bad limit", "GET", "/events?limit=0", bearer, ``, 400, "limit", "from 1 to"},
		{"events bad MAC", "GET", "/events?mac=x", bearer, ``, 400, "mac", "Ethernet MAC"},
		{"events unknown query", "GET", "/events?since=1", bearer, ``, 400, "since", "unknown query"},
		{"no such endpoint", "GET", "/nope", bearer, ``, 404, "", "no API endpoint"},
		{"wrong method", "DELETE", "/leases", bearer, ``, 405, "", "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb ErrorBody
			got, h := e.do(t, tt.method, tt.path, tt.auth, tt.body, &eb)
			if got != tt.status || eb.Field != tt.field || !strings.Contains(eb.Error, tt.msg) {
				t.Fatalf("got %d %+v, want %d field %q error containing %q", got, eb, tt.status, tt.field, tt.msg)
			}
			if got == 401 && h.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// None of that changed anything.
	var ml MachineList
	e.mustDo(t, "GET", "/machines", "", 200, &ml)
	if len(ml.Machines) != 2 {
		t.Fatalf("after the failed calls: %d machines, want 2", len(ml.Machines))
	}
}

func TestOpenReads(t *testing.T) {
	for _, open := range []bool{false, true} {
		e := newEnv(t, open)
		want := 401
		if open {
			want = 200
		}
		for _, p := range []string{"/machines", "/machines/pc-cfg", "/profiles", "/profiles/cfgprof", "/leases", "/events"} {
			if got, _ := e.do(t, "GET", p, "", "", nil); got != want {
				t.Errorf("open_reads=%v: GET %s without token = %d, want %d", open, p, got, want)
			}
		}
		// Writes always need the token.
		if got, _ := e.do(t, "POST", "/profiles", "", `{"name":"x","kernel":"/k"}`, nil); got != 401 {
			t.Errorf("open_reads=%v: POST without token = %d, want 401", open, got)
		}
		// The document is always open.
		if got, _ := e.do(t, "GET", "/openapi.json", "", "", nil); got != 200 {
			t.Errorf("GET /openapi.json without token = %d, want 200", got)
		}
	}
}

func TestMachineLifecycle(t *testing.T) {
	e := newEnv(t, false)
	e.mustDo(t, "POST", "/profiles", `{"name":"linux","kernel":"/vmlinuz","initrd":["/initrd"],"cmdline":"console=ttyS0 host={{.Name}}"}`, 201, nil)
	var m Machine
	h := e.mustDo(t, "POST", "/machines", `{"mac":"52-54-00-AA-00-01","name":"pc1","profile":"linux","labels":{"room":"a","row":"1"}}`, 201, &m)
	if h.Get("Location") != Prefix+"/machines/52:54:00:aa:00:01" || m.MAC != "52:54:00:aa:00:01" || m.State != "ready" || m.Source != "api" {
		t.Fatalf("created %+v at %q", m, h.Get("Location"))
	}
	// By MAC, by hyphenated MAC and by name.
	for _, key := range []string{"52:54:00:aa:00:01", "52-54-00-aa-00-01", "pc1"} {
		var got Machine
		e.mustDo(t, "GET", "/machines/"+key, "", 200, &got)
		if got.Name != "pc1" {
			t.Fatalf("GET %s = %+v", key, got)
		}
	}
	e.mustDo(t, "PATCH", "/machines/pc1", `{"labels":{"row":null,"rack":"r2"},"ip":"10.0.0.9"}`, 200, &m)
	if len(m.Labels) != 2 || m.Labels["room"] != "a" || m.Labels["rack"] != "r2" || m.IP != "10.0.0.9" || m.Profile != "linux" {
		t.Fatalf("after PATCH: %+v", m)
	}
	e.mustDo(t, "PUT", "/machines/pc1", `{"name":"pc1b"}`, 200, &m)
	if m.Name != "pc1b" || m.Profile != "" || m.IP != "" || len(m.Labels) != 0 {
		t.Fatalf("PUT replaces every field; got %+v", m)
	}

	// A discovered machine is enrolled by giving it a profile.
	disc := inventory.Machine{MAC: []byte{0x52, 0x54, 0, 0xaa, 0, 2}, State: inventory.StateDiscovered}
	if _, err := e.store.CreateMachine(context.Background(), disc); err != nil {
		t.Fatal(err)
	}
	var ml MachineList
	e.mustDo(t, "GET", "/machines?state=discovered", "", 200, &ml)
	if len(ml.Machines) != 1 || ml.Machines[0].MAC != "52:54:00:aa:00:02" {
		t.Fatalf("discovered list: %+v", ml)
	}
	e.mustDo(t, "PATCH", "/machines/52:54:00:aa:00:02", `{"profile":"linux","name":"pc2"}`, 200, &m)
	if m.State != "ready" {
		t.Fatalf("after enrolling: %+v", m)
	}
	e.mustDo(t, "GET", "/machines?profile=linux&label=room=a", "", 200, &ml)
	if len(ml.Machines) != 0 {
		t.Fatalf("filter profile+label: %+v", ml)
	}
	e.mustDo(t, "GET", "/machines?profile=linux", "", 200, &ml)
	if len(ml.Machines) != 1 || ml.Machines[0].Name != "pc2" {
		t.Fatalf("filter profile: %+v", ml)
	}

	e.mustDo(t, "DELETE", "/machines/pc1b", "", 204, nil)
	if got, _ := e.do(t, "GET", "/machines/pc1b", bearer, "", nil); got != 404 {
		t.Fatalf("GET after DELETE = %d", got)
	}
	var ev EventList
	e.mustDo(t, "GET", "/events?mac=52:54:00:aa:00:01", "", 200, &ev)
	var kinds []string
	for _, x := range ev.Events {
		kinds = append(kinds, x.Kind)
	}
	if strings.Join(kinds, ",") != "machine.removed,machine.updated,machine.updated,machine.added" {
		t.Fatalf("events: %v", kinds)
	}
	if n := e.changes.Load(); n != 6 {
		t.Fatalf("OnChange called %d times, want 6 (profile add, machine add, patch, put, patch, delete)", n)
	}
}

func TestProfilesAndLeases(t *testing.T) {
	e := newEnv(t, false)
	var p Profile
	e.mustDo(t, "POST", "/profiles", `{"name":"rescue","kernel":"http://x/vmlinuz","initrd":["a","b"],"cmdline":"done={{.DoneURL}}"}`, 201, &p)
	if p.Source != "api" || len(p.Initrd) != 2 {
		t.Fatalf("created %+v", p)
	}
	e.mustDo(t, "PUT", "/profiles/rescue", `{"kernel":"/k2"}`, 200, &p)
	if p.Kernel != "/k2" || len(p.Initrd) != 0 {
		t.Fatalf("after PUT %+v", p)
	}
	var pl ProfileList
	e.mustDo(t, "GET", "/profiles", "", 200, &pl)
	if len(pl.Profiles) != 2 || pl.Profiles[0].Name != "cfgprof" || pl.Profiles[0].Source != "config" {
		t.Fatalf("profiles: %+v", pl)
	}
	e.mustDo(t, "DELETE", "/profiles/rescue", "", 204, nil)
	e.mustDo(t, "POST", "/profiles", `{"name":"own","root_image":"debian","root_kernel":"image"}`, 201, &p)
	if p.RootKernel != "image" || p.Kernel != "" || p.Overlay != "ephemeral" {
		t.Fatalf("created with root_kernel image: %+v", p)
	}
	e.mustDo(t, "DELETE", "/profiles/own", "", 204, nil)

	exp := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	for i, ip := range []string{"10.0.0.100", "10.0.0.20"} {
		l := inventory.Lease{MAC: []byte{0x52, 0x54, 0, 0, 1, byte(i)}, IP: parseIP(ip), Expiry: exp}
		if err := e.store.PutLease(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	var ll LeaseList
	e.mustDo(t, "GET", "/leases", "", 200, &ll)
	if len(ll.Leases) != 2 || ll.Leases[0].IP != "10.0.0.20" || !ll.Leases[0].Expiry.Equal(exp) {
		t.Fatalf("leases: %+v", ll)
	}
}

func TestNewRefusesWeakConfig(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := New(Config{Store: st, Token: "short"}); err == nil {
		t.Fatal("New accepted a short token")
	}
	if _, err := New(Config{Token: token}); err == nil {
		t.Fatal("New accepted no store")
	}
}
