package api

import (
	"context"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// wantScope is each route's scope, written out apart from the route table
// so that a scope changed there by mistake fails here.
var wantScope = map[string]inventory.Scope{
	"GET /machines":                    read,
	"POST /machines":                   admin,
	"GET /machines/{mac}":              read,
	"PUT /machines/{mac}":              admin,
	"PATCH /machines/{mac}":            operate,
	"DELETE /machines/{mac}":           admin,
	"POST /machines/{mac}/reset":       operate,
	"POST /machines/{mac}/rekey":       admin,
	"GET /machines/{mac}/files":        admin,
	"GET /known-hosts":                 read,
	"GET /profiles":                    read,
	"POST /profiles":                   admin,
	"GET /profiles/{name}":             read,
	"PUT /profiles/{name}":             admin,
	"DELETE /profiles/{name}":          admin,
	"GET /images":                      read,
	"GET /images/{name}":               read,
	"PUT /images/{name}":               admin,
	"DELETE /images/{name}":            admin,
	"GET /leases":                      read,
	"GET /events":                      read,
	"GET /servers":                     read,
	"DELETE /servers/{name}":           admin,
	"GET /boots":                       read,
	"GET /boots/{id}":                  read,
	"GET /tokens":                      admin,
	"POST /tokens":                     admin,
	"DELETE /tokens/{name}":            admin,
	"GET /audit":                       admin,
	"GET /openapi.json":                "",
	"GET /machines/{mac}/power":        read,
	"PUT /machines/{mac}/power":        admin,
	"DELETE /machines/{mac}/power":     admin,
	"POST /power":                      operate,
	"GET /machines/{mac}/next-boot":    read,
	"PUT /machines/{mac}/next-boot":    operate,
	"DELETE /machines/{mac}/next-boot": operate,
	"GET /schedules":                   read,
	"POST /schedules":                  admin,
	"DELETE /schedules/{name}":         admin,

	// Image versions (issue 33): retire, like import, is admin.
	"GET /images/{name}/versions":                    read,
	"POST /images/{name}/versions/{version}/promote": operate,
	"POST /images/{name}/rollback":                   operate,
	"POST /images/{name}/versions/{version}/retire":  admin,
	"POST /images/{name}/edit":                       operate,
	"POST /images/{name}/commit":                     operate,
	"POST /images/{name}/abandon":                    operate,
	"POST /images/{name}/merge":                      admin,
	"GET /images/{name}/merge":                       read,
}

// scopeTokens makes one stored token of each scope and returns their
// bearer headers.
func scopeTokens(t *testing.T, e *env) map[inventory.Scope]string {
	t.Helper()
	out := map[inventory.Scope]string{}
	for _, sc := range []inventory.Scope{read, operate, admin} {
		secret := newSecret()
		if _, err := e.store.CreateToken(context.Background(), inventory.Token{Name: "t-" + string(sc), Scope: sc, Hash: HashToken(secret)}); err != nil {
			t.Fatal(err)
		}
		out[sc] = "Bearer " + secret
	}
	return out
}

// TestRouteScopes proves each route's scope: a token with the scope gets
// past the check, one without gets 403 naming the scope it needs, and no
// token at all gets 401.
func TestRouteScopes(t *testing.T) {
	e := newEnv(t, false)
	toks := scopeTokens(t, e)
	all := append(append([]route(nil), routes...), bootRoutes...)
	if len(all) != len(wantScope) {
		t.Errorf("%d routes, %d in wantScope; add the new route's scope to wantScope", len(all), len(wantScope))
	}
	// Path values that name nothing: the handlers answer 4xx, never 403.
	fill := strings.NewReplacer("{mac}", "52:54:00:00:00:99", "{name}", "nothing", "{id}", "nothing")
	for _, rt := range all {
		key := rt.method + " " + rt.path
		t.Run(key, func(t *testing.T) {
			need, ok := wantScope[key]
			if !ok {
				t.Fatalf("route %s has no entry in wantScope", key)
			}
			if rt.scope != need {
				t.Fatalf("route %s declares scope %q, want %q", key, rt.scope, need)
			}
			if strings.HasPrefix(rt.path, "/boots") {
				return // served only with a boot source; the declaration is what counts
			}
			path := fill.Replace(rt.path)
			for _, sc := range []inventory.Scope{read, operate, admin} {
				var eb ErrorBody
				got, _ := e.do(t, rt.method, path, toks[sc], `{}`, &eb)
				switch allowed := need == "" || sc.Allows(need); {
				case allowed && (got == 401 || got == 403):
					t.Errorf("%s with a %s token: %d %q, want past the scope check", key, sc, got, eb.Error)
				case !allowed && (got != 403 || !strings.Contains(eb.Error, "needs scope "+string(need))):
					t.Errorf("%s with a %s token: %d %q, want 403 naming scope %s", key, sc, got, eb.Error, need)
				}
			}
			if got, _ := e.do(t, rt.method, path, "", `{}`, nil); need != "" && got != 401 {
				t.Errorf("%s without a token: %d, want 401", key, got)
			}
		})
	}
}

// TestPatchScope: operate may move a machine to another profile, and
// nothing else.
func TestPatchScope(t *testing.T) {
	e := newEnv(t, false)
	toks := scopeTokens(t, e)
	e.mustDo(t, "POST", "/profiles", `{"name":"linux","kernel":"/vmlinuz"}`, 201, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, 201, nil)
	tests := []struct {
		name, auth, body string
		status           int
	}{
		{"operate sets profile", toks[operate], `{"profile":"linux"}`, 200},
		{"operate renames", toks[operate], `{"name":"pc2"}`, 403},
		{"operate relabels", toks[operate], `{"profile":"linux","labels":{"a":"b"}}`, 403},
		{"operate readdresses", toks[operate], `{"ip":"10.0.0.9"}`, 403},
		{"read sets profile", toks[read], `{"profile":"linux"}`, 403},
		{"admin renames", toks[admin], `{"name":"pc2"}`, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb ErrorBody
			got, _ := e.do(t, "PATCH", "/machines/52:54:00:00:00:01", tt.auth, tt.body, &eb)
			if got != tt.status {
				t.Fatalf("got %d %q, want %d", got, eb.Error, tt.status)
			}
			if got == 403 && !strings.Contains(eb.Error, "needs scope") {
				t.Fatalf("403 %q does not name the scope needed", eb.Error)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, false)
	var made Token
	e.mustDo(t, "POST", "/tokens", `{"name":"ci","scope":"read"}`, 201, &made)
	if made.Name != "ci" || made.Scope != "read" || len(made.Secret) != 64 {
		t.Fatalf("POST /tokens answered %+v, want ci, read and a 64-digit secret", made)
	}
	// The store has the hash, never the secret.
	stored, err := e.store.ListTokens(context.Background())
	if err != nil || len(stored) != 1 || stored[0].Hash != HashToken(made.Secret) || strings.Contains(stored[0].Hash, made.Secret) {
		t.Fatalf("stored tokens %+v (%v), want one holding the secret's SHA-256", stored, err)
	}
	var list TokenList
	e.mustDo(t, "GET", "/tokens", "", 200, &list)
	if len(list.Tokens) != 2 || list.Tokens[0].Name != FileTokenName || list.Tokens[1].Name != "ci" || list.Tokens[1].Secret != "" {
		t.Fatalf("GET /tokens = %+v, want api-token and ci, no secrets", list)
	}
	ci := "Bearer " + made.Secret
	if got, _ := e.do(t, "GET", "/machines", ci, "", nil); got != 200 {
		t.Fatalf("the new read token lists machines: %d, want 200", got)
	}
	for _, tt := range []struct{ name, method, path, body string }{
		{"duplicate", "POST", "/tokens", `{"name":"ci","scope":"admin"}`},
		{"file token name", "POST", "/tokens", `{"name":"api-token","scope":"admin"}`},
		{"revoke file token", "DELETE", "/tokens/api-token", ``},
	} {
		var eb ErrorBody
		if got, _ := e.do(t, tt.method, tt.path, bearer, tt.body, &eb); got != 409 {
			t.Errorf("%s: %d %q, want 409", tt.name, got, eb.Error)
		}
	}
	var eb ErrorBody
	if got, _ := e.do(t, "POST", "/tokens", bearer, `{"name":"x","scope":"root"}`, &eb); got != 400 || eb.Field != "scope" {
		t.Errorf("bad scope: %d %+v, want 400 field scope", got, eb)
	}
	e.mustDo(t, "DELETE", "/tokens/ci", "", 204, nil)
	if got, _ := e.do(t, "GET", "/machines", ci, "", &eb); got != 401 || !strings.Contains(eb.Error, "revoked") {
		t.Fatalf("a revoked token: %d %q, want 401 saying revoked", got, eb.Error)
	}
}
