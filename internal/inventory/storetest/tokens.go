package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func testTokens(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	at := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	h1, h2 := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	got := must[inventory.Token](t)(s.CreateToken(c, inventory.Token{Name: "ci", Scope: inventory.ScopeRead, Hash: h1, Created: at}))
	if got.Name != "ci" || got.Scope != inventory.ScopeRead || got.Hash != h1 || !got.Created.Equal(at) {
		t.Fatalf("CreateToken = %#v", got)
	}
	must[inventory.Token](t)(s.CreateToken(c, inventory.Token{Name: "alice", Scope: inventory.ScopeAdmin, Hash: h2}))
	if l := must[[]inventory.Token](t)(s.ListTokens(c)); len(l) != 2 || l[0].Name != "alice" || l[1].Name != "ci" || l[0].Created.IsZero() {
		t.Fatalf("ListTokens = %+v, want alice then ci, with times", l)
	}
	if tok := must[inventory.Token](t)(s.TokenByHash(c, h2)); tok.Name != "alice" || tok.Scope != inventory.ScopeAdmin {
		t.Fatalf("TokenByHash = %+v, want alice, admin", tok)
	}
	_, err := s.TokenByHash(c, strings.Repeat("00", 32))
	wantErr(t, err, inventory.ErrNotFound, "token")

	bad := []struct {
		tok   inventory.Token
		kind  error
		field string
	}{
		{inventory.Token{Name: "ci", Scope: inventory.ScopeRead, Hash: strings.Repeat("3c", 32)}, inventory.ErrConflict, "name"},
		{inventory.Token{Name: "x", Scope: "root", Hash: h1}, inventory.ErrInvalid, "scope"},
		{inventory.Token{Name: "a b", Scope: inventory.ScopeRead, Hash: h1}, inventory.ErrInvalid, "name"},
		{inventory.Token{Name: "plain", Scope: inventory.ScopeRead, Hash: "secret"}, inventory.ErrInvalid, "hash"},
	}
	for _, tt := range bad {
		_, err := s.CreateToken(c, tt.tok)
		wantErr(t, err, tt.kind, tt.field)
	}

	if err := s.DeleteToken(c, "ci"); err != nil {
		t.Fatal(err)
	}
	// A revoked token no longer authenticates, and its name is free again.
	_, err = s.TokenByHash(c, h1)
	wantErr(t, err, inventory.ErrNotFound, "token")
	wantErr(t, s.DeleteToken(c, "ci"), inventory.ErrNotFound, "name")
	must[inventory.Token](t)(s.CreateToken(c, inventory.Token{Name: "ci", Scope: inventory.ScopeOperate, Hash: h1}))

	s = b.Reopen(t, s)
	if tok := must[inventory.Token](t)(s.TokenByHash(c, h1)); tok.Name != "ci" || tok.Scope != inventory.ScopeOperate {
		t.Fatalf("after reopen TokenByHash = %+v, want ci, operate", tok)
	}
}

func testAudit(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)
	for i := range 4 {
		e := inventory.AuditEntry{Time: t0.Add(time.Duration(i) * time.Minute), Token: "alice", Remote: "10.0.0.9:5000",
			Route: "PATCH /machines/{mac}", Target: "52:54:00:00:00:01", Summary: fmt.Sprintf(`{"profile":"p%d"}`, i), Status: 200}
		if err := s.AddAudit(c, e); err != nil {
			t.Fatal(err)
		}
	}
	all := must[[]inventory.AuditEntry](t)(s.ListAudit(c, inventory.AuditFilter{}))
	if len(all) != 4 || all[0].Summary != `{"profile":"p3"}` || all[0].ID <= all[1].ID || !all[0].Time.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("ListAudit = %+v, want 4 newest first with increasing IDs", all)
	}
	if e := all[3]; e.Token != "alice" || e.Remote != "10.0.0.9:5000" || e.Route != "PATCH /machines/{mac}" || e.Target != "52:54:00:00:00:01" || e.Status != 200 {
		t.Fatalf("entry read back as %+v", e)
	}
	since := must[[]inventory.AuditEntry](t)(s.ListAudit(c, inventory.AuditFilter{Since: t0.Add(2 * time.Minute)}))
	if len(since) != 2 || since[1].Summary != `{"profile":"p2"}` {
		t.Fatalf("ListAudit since t0+2m = %+v, want p3, p2", since)
	}
	if one := must[[]inventory.AuditEntry](t)(s.ListAudit(c, inventory.AuditFilter{Limit: 1})); len(one) != 1 || one[0].ID != all[0].ID {
		t.Fatalf("ListAudit limit 1 = %+v, want the newest", one)
	}
	wantErr(t, s.AddAudit(c, inventory.AuditEntry{Route: "POST /profiles", Status: 201}), inventory.ErrInvalid, "token")
	// An over-long summary is kept, cut, rather than refused.
	long := inventory.AuditEntry{Token: "alice", Route: "POST /profiles", Summary: strings.Repeat("é", inventory.MaxAuditSummary), Status: 201}
	if err := s.AddAudit(c, long); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	got := must[[]inventory.AuditEntry](t)(s.ListAudit(c, inventory.AuditFilter{}))
	if len(got) != 5 || len(got[0].Summary) > inventory.MaxAuditSummary || !strings.HasPrefix(got[0].Summary, "éé") || got[0].Time.IsZero() {
		t.Fatalf("after reopen: %d entries, newest %+v; want 5, the newest cut to %d bytes with a time", len(got), got[0], inventory.MaxAuditSummary)
	}
}
