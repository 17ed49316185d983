package sqldb

import (
	"context"
	"database/sql"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// DefaultAuditKeep is how many audit entries the store keeps. Changes
// through the API are an admin's pace, so this is years of them; the
// bound is for a token that retries a refused change in a loop.
const DefaultAuditKeep = 100_000

// AddAudit implements inventory.Audit. It also drops the entries older
// than the newest auditKeep.
func (s *Store) AddAudit(ctx context.Context, e inventory.AuditEntry) error {
	if err := e.Validate(s.now()); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO audit (at, token, remote, route, target, summary, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			s.d.timeArg(e.Time), e.Token, e.Remote, e.Route, e.Target, e.Summary, e.Status); err != nil {
			return err
		}
		// By id, not by OFFSET: ids only grow, so this is one index probe
		// however long the trail. Gaps in ids only keep a few less.
		_, err := s.exec(ctx, tx, `DELETE FROM audit WHERE id <= (SELECT MAX(id) FROM audit) - ?`, s.auditKeep)
		return err
	})
}

// ListAudit implements inventory.Audit.
func (s *Store) ListAudit(ctx context.Context, f inventory.AuditFilter) ([]inventory.AuditEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, inventory.MaxAuditLimit)
	q, args := `SELECT id, at, token, remote, route, target, summary, status FROM audit`, []any{}
	if !f.Since.IsZero() {
		q += ` WHERE at >= ?`
		args = append(args, s.d.timeArg(f.Since))
	}
	rows, err := s.query(ctx, s.r, q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.AuditEntry{}
	for rows.Next() {
		var e inventory.AuditEntry
		if err := rows.Scan(&e.ID, scanTime{&e.Time}, &e.Token, &e.Remote, &e.Route, &e.Target, &e.Summary, &e.Status); err != nil {
			return nil, s.dbErr("read audit entry", err)
		}
		out = append(out, e)
	}
	return out, s.rowsErr(rows)
}

// SetAuditKeep changes how many audit entries are kept (default
// DefaultAuditKeep), so tests can see the bound work.
func (s *Store) SetAuditKeep(n int) { s.auditKeep = n }
