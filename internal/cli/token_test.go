package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/api"
)

// TestTokensAndAudit walks least privilege through the CLI: an admin makes
// a read token, which lists but is refused a change with the scope it
// needs, and the audit shows both, by token name.
func TestTokensAndAudit(t *testing.T) {
	srv, _ := newServer(t)
	t.Setenv("BOOTFLEET_SERVER", srv.URL)
	t.Setenv("BOOTFLEET_TOKEN", "")
	admin := []string{"--token", testToken, "--data", t.TempDir()}

	var made api.Token
	out := run(t, append([]string{"token", "create", "viewer", "--scope", "read", "-o", "json"}, admin...)...)
	if err := json.Unmarshal([]byte(out), &made); err != nil || made.Name != "viewer" || made.Scope != "read" || len(made.Secret) != 64 {
		t.Fatalf("token create -o json printed %q (%v), want name, scope and the 64-digit secret as token", out, err)
	}
	if out := run(t, append([]string{"token", "create", "x", "--scope", "root"}, admin...)...); !strings.Contains(out, "--scope: want read, operate or admin") {
		t.Fatalf("bad scope: %q", out)
	}
	if out := run(t, append([]string{"token", "list"}, admin...)...); !strings.Contains(out, "api-token") || !strings.Contains(out, "viewer") || strings.Contains(out, made.Secret) {
		t.Fatalf("token list: %q, want api-token and viewer, no secret", out)
	}
	viewer := []string{"--token", made.Secret, "--data", t.TempDir()}
	if out := run(t, append([]string{"profile", "list"}, viewer...)...); strings.Contains(out, "error") {
		t.Fatalf("a read token listing profiles: %q", out)
	}
	out = run(t, append([]string{"profile", "add", "p", "--kernel", "/k"}, viewer...)...)
	if !strings.Contains(out, "error: token viewer has scope read, but POST /profiles needs scope admin") {
		t.Fatalf("a read token adding a profile: %q, want the 403 naming scope admin", out)
	}
	run(t, append([]string{"profile", "add", "p", "--kernel", "/k"}, admin...)...)

	var entries []api.AuditEntry
	out = run(t, append([]string{"audit", "-o", "json"}, admin...)...)
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("audit -o json: %v in %q", err, out)
	}
	if len(entries) != 3 || entries[0].Token != api.FileTokenName || entries[0].Route != "POST /profiles" || entries[0].Status != 201 ||
		entries[1].Token != "viewer" || entries[1].Status != 403 || entries[2].Route != "POST /tokens" {
		t.Fatalf("audit: %+v, want the profile add, the refused one by viewer, the token create", entries)
	}
	if out := run(t, append([]string{"audit", "--limit", "1"}, admin...)...); !strings.Contains(out, "POST /profiles") || strings.Contains(out, "viewer") {
		t.Fatalf("audit --limit 1: %q", out)
	}
	if out := run(t, append([]string{"token", "revoke", "viewer"}, admin...)...); out != "token viewer revoked\n" {
		t.Fatalf("token revoke: %q", out)
	}
	if out := run(t, append([]string{"profile", "list"}, viewer...)...); !strings.Contains(out, "revoked") {
		t.Fatalf("a revoked token: %q", out)
	}
}
