package api

import (
	"strings"
	"testing"
)

// TestAuditTrail: every change with a valid token is recorded with who,
// what, where from and how it ended; reads and tokenless calls are not.
func TestAuditTrail(t *testing.T) {
	e := newEnv(t, false)
	toks := scopeTokens(t, e)
	e.mustDo(t, "POST", "/profiles", `{"name": "linux",  "kernel": "/vmlinuz"}`, 201, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, 201, nil)
	if got, _ := e.do(t, "PATCH", "/machines/pc1", toks[operate], `{"profile":"linux"}`, nil); got != 200 {
		t.Fatalf("operate PATCH: %d", got)
	}
	if got, _ := e.do(t, "DELETE", "/profiles/linux", toks[read], ``, nil); got != 403 {
		t.Fatalf("read DELETE: %d, want 403", got)
	}
	e.do(t, "DELETE", "/profiles/linux", "", ``, nil)                                // 401: no one to name
	e.do(t, "DELETE", "/profiles/linux", "Bearer "+strings.Repeat("0", 64), ``, nil) // 401 too
	e.mustDo(t, "GET", "/machines", "", 200, nil)                                    // a read

	var got AuditList
	e.mustDo(t, "GET", "/audit", "", 200, &got)
	want := []struct {
		token, route, target, summary string
		status                        int
	}{
		{"t-read", "DELETE /profiles/{name}", "linux", "", 403},
		{"t-operate", "PATCH /machines/{mac}", "pc1", `{"profile":"linux"}`, 200},
		{FileTokenName, "POST /machines", "", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, 201},
		{FileTokenName, "POST /profiles", "", `{"name":"linux","kernel":"/vmlinuz"}`, 201},
	}
	if len(got.Entries) != len(want) {
		t.Fatalf("GET /audit: %d entries %+v, want %d", len(got.Entries), got.Entries, len(want))
	}
	for i, w := range want {
		g := got.Entries[i]
		if g.Token != w.token || g.Route != w.route || g.Target != w.target || g.Summary != w.summary || g.Status != w.status {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
		if !strings.HasPrefix(g.Remote, "127.0.0.1:") || g.Time.IsZero() {
			t.Errorf("entry %d: remote %q time %v, want the client's 127.0.0.1:PORT and a time", i, g.Remote, g.Time)
		}
	}
	var one AuditList
	e.mustDo(t, "GET", "/audit?limit=1&since=2026-01-01T00:00:00Z", "", 200, &one)
	if len(one.Entries) != 1 || one.Entries[0].ID != got.Entries[0].ID {
		t.Fatalf("GET /audit?limit=1 = %+v, want the newest", one)
	}
	var eb ErrorBody
	if code, _ := e.do(t, "GET", "/audit?since=yesterday", bearer, "", &eb); code != 400 || eb.Field != "since" {
		t.Fatalf("bad since: %d %+v, want 400 field since", code, eb)
	}
	if code, _ := e.do(t, "GET", "/audit", toks[operate], "", &eb); code != 403 || !strings.Contains(eb.Error, "needs scope admin") {
		t.Fatalf("operate reading the audit: %d %q, want 403 naming admin", code, eb.Error)
	}
}
