package inventory

import (
	"context"
	"time"
)

// AuditEntry is one change asked of the API: who, what, when, from where,
// and how it ended.
type AuditEntry struct {
	ID      int64 // assigned by the store, increasing
	Time    time.Time
	Token   string // the token's name
	Remote  string // the client's address, host:port
	Route   string // the route as declared, e.g. "PATCH /machines/{mac}"
	Target  string // the MAC, profile, image or token the route names; may be empty
	Summary string // a short account of the change, e.g. `{"profile":"rescue"}`
	Status  int    // the HTTP status answered
}

// AuditFilter selects entries in ListAudit, newest first.
type AuditFilter struct {
	Since time.Time // zero: from the oldest kept
	Limit int       // default 100, at most MaxAuditLimit
}

// MaxAuditLimit caps one ListAudit answer.
const MaxAuditLimit = 1000

// Limits on an entry's text, so a hostile body cannot grow the table.
const (
	MaxAuditSummary = 512
	MaxAuditField   = 255
)

// Audit is the API's audit trail.
type Audit interface {
	// AddAudit appends e; a zero e.Time means now. The store keeps the
	// newest entries only (see the implementation), so the trail cannot
	// fill the disk.
	AddAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns matching entries, newest first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// Validate checks e, fills Time when zero and cuts over-long text (an
// audit trail keeps a truncated record rather than none).
func (e *AuditEntry) Validate(now time.Time) error {
	if e.Token == "" {
		return invalid("token", "want the name of the token that made the change")
	}
	if e.Route == "" {
		return invalid("route", "want the route that was called, e.g. PATCH /machines/{mac}")
	}
	if e.Status < 100 || e.Status > 599 {
		return invalid("status", "want an HTTP status 100..599, got %d", e.Status)
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Token, e.Remote, e.Route, e.Target = cut(e.Token, MaxAuditField), cut(e.Remote, MaxAuditField), cut(e.Route, MaxAuditField), cut(e.Target, MaxAuditField)
	e.Summary = cut(e.Summary, MaxAuditSummary)
	return nil
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
