package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identitysvc"
)

// TestRootFilesRoundTrip sets files: and vars: on a profile and a machine
// through the API, reads them back, renders them, and sees every bad
// template refused with 400 and the reason before anything is stored.
func TestRootFilesRoundTrip(t *testing.T) {
	e := newEnv(t, false)
	ids, err := identitysvc.New(identitysvc.Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	e.serveIdentities(t, ids)

	e.mustDo(t, "POST", "/profiles", `{"name":"lab","kernel":"/k","vars":{"room":"B12","url":"https://kiosk/"},
		"files":[{"path":"/etc/kiosk","mode":"0600","owner":"kiosk:kiosk","template":"{{.Vars.url}}?seat={{.Name}}\n"},
		{"path":"/etc/motd","template":"{{.Name}} in {{.Vars.room}}\n"}]}`, 201, nil)
	var p Profile
	e.mustDo(t, "GET", "/profiles/lab", "", 200, &p)
	if len(p.Files) != 2 || p.Files[0].Mode != "0600" || p.Files[0].Owner != "kiosk:kiosk" || p.Files[1].Mode != "0644" || p.Vars["room"] != "B12" {
		t.Fatalf("profile read back: files %+v vars %v", p.Files, p.Vars)
	}
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1","profile":"lab","ip":"10.0.0.50",
		"vars":{"room":"B13"},"files":[{"path":"/etc/hosts","template":"{{.IP}} {{.Name}} {{.Vars.url}}\n"}]}`, 201, nil)
	var m Machine
	e.mustDo(t, "GET", "/machines/pc1", "", 200, &m)
	if len(m.Files) != 1 || m.Files[0].Path != "/etc/hosts" || m.Vars["room"] != "B13" {
		t.Fatalf("machine read back: files %+v vars %v", m.Files, m.Vars)
	}

	var files RenderedFiles
	e.mustDo(t, "GET", "/machines/pc1/files", "", 200, &files)
	want := map[string]string{"/etc/hosts": "10.0.0.50 pc1 https://kiosk/\n", "/etc/kiosk": "https://kiosk/?seat=pc1\n", "/etc/motd": "pc1 in B13\n"}
	if len(files.Files) != len(want) {
		t.Fatalf("rendered %+v, want %v", files.Files, want)
	}
	for _, f := range files.Files {
		if want[f.Path] != f.Content {
			t.Fatalf("rendered %s = %q, want %q (the machine's vars win)", f.Path, f.Content, want[f.Path])
		}
	}

	bad := []struct {
		method, path, body, field, why string
	}{
		{"POST", "/profiles", `{"name":"p2","kernel":"/k","files":[{"path":"/etc/a","template":"{{.Nmae}}"}]}`, "files", "unknown variable .Nmae"},
		{"POST", "/profiles", `{"name":"p2","kernel":"/k","files":[{"path":"/etc/a","template":"{{.Vars.nope}}"}]}`, "files", "unknown variable .Vars.nope"},
		{"POST", "/profiles", `{"name":"p2","kernel":"/k","files":[{"path":"/etc/a","template":"{{.Name"}]}`, "files", "does not parse"},
		{"POST", "/profiles", `{"name":"p2","kernel":"/k","files":[{"path":"/etc/a","mode":"0999","template":"x"}]}`, "files", "octal mode"},
		{"POST", "/profiles", `{"name":"p2","kernel":"/k","files":[{"path":"/etc/a","owner":"-x","template":"x"}]}`, "files", "owner"},
		{"POST", "/machines", `{"mac":"52:54:00:00:00:02","profile":"lab","files":[{"path":"/etc/a","template":"{{.Vars.seat}}"}]}`, "files", "unknown variable .Vars.seat"},
		{"PATCH", "/machines/pc1", `{"files":[{"path":"/etc/a","template":"{{.Vars.seat}}"}]}`, "files", "unknown variable .Vars.seat"},
		// pc1's /etc/hosts uses url, which only the profile sets.
		{"PUT", "/profiles/lab", `{"name":"lab","kernel":"/k","vars":{"room":"B12"}}`, "vars", "unknown variable .Vars.url"},
	}
	for _, tt := range bad {
		var eb ErrorBody
		e.mustDo(t, tt.method, tt.path, tt.body, 400, &eb)
		if eb.Field != tt.field || !strings.Contains(eb.Error, tt.why) {
			t.Errorf("%s %s %s: error %+v, want field %s and %q", tt.method, tt.path, tt.body, eb, tt.field, tt.why)
		}
	}
	e.mustDo(t, "GET", "/profiles/p2", "", 404, nil)
	e.mustDo(t, "GET", "/machines/52:54:00:00:00:02", "", 404, nil)

	// A PATCH that sets the var makes the file good; [] and {} remove them.
	e.mustDo(t, "PATCH", "/machines/pc1", `{"vars":{"seat":"7"},"files":[{"path":"/etc/seat","template":"{{.Vars.seat}}"}]}`, 200, &m)
	if len(m.Files) != 1 || m.Files[0].Path != "/etc/seat" || m.Vars["seat"] != "7" {
		t.Fatalf("patched: files %+v vars %v", m.Files, m.Vars)
	}
	e.mustDo(t, "PATCH", "/machines/pc1", `{"vars":{},"files":[]}`, 200, &m)
	if m.Files != nil || m.Vars != nil {
		t.Fatalf("patched away: files %+v vars %v", m.Files, m.Vars)
	}
}

// serveIdentities serves e's API with ids as its identity service.
func (e *env) serveIdentities(t *testing.T, ids IdentityService) {
	t.Helper()
	h, err := New(Config{Store: e.store, Token: token, Identities: ids})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
}
