package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Store is an inventory.Store over database/sql.
type Store struct {
	w, r *sql.DB // writer and reader pools; the same pool for PostgreSQL
	d    *Dialect
	now  func() time.Time
	// EventsPerMachine bounds each machine's timeline; older events are
	// dropped as new ones arrive.
	eventsPerMachine int
	// auditKeep bounds the audit trail; older entries are dropped.
	auditKeep int
}

// DefaultEventsPerMachine is how many events each machine keeps.
const DefaultEventsPerMachine = 500

// New returns a Store writing through w and reading through r, which may be
// the same pool. Close closes both.
func New(w, r *sql.DB, d *Dialect) *Store {
	return &Store{w: w, r: r, d: d, now: time.Now, eventsPerMachine: DefaultEventsPerMachine,
		auditKeep: DefaultAuditKeep}
}

// Close closes the pools.
func (s *Store) Close() error {
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

var _ inventory.Store = (*Store)(nil)

// tx runs fn in a write transaction and commits when it returns nil.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.dbErr("begin", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return s.classify(err)
	}
	if err := tx.Commit(); err != nil {
		return s.classify(s.dbErr("commit", err))
	}
	return nil
}

func (s *Store) dbErr(op string, err error) error {
	var ie *inventory.Error
	if errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", s.d.Name, op, err)
}

// classify turns a constraint violation the pre-checks missed (a race with
// another server, say) into a typed inventory error.
func (s *Store) classify(err error) error {
	var ie *inventory.Error
	if errors.As(err, &ie) {
		return err
	}
	kind, col, ok := s.d.Violation(err)
	if !ok {
		return err
	}
	if kind == "foreign" {
		return inventory.Conflict(col, "refers to a record that was removed meanwhile; retry")
	}
	return inventory.Conflict(col, "already used by another record")
}

func (s *Store) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	res, err := tx.ExecContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, s.dbErr("exec", err)
	}
	return res, nil
}

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (s *Store) query(ctx context.Context, q querier, sqlText string, args ...any) (*sql.Rows, error) {
	rows, err := q.QueryContext(ctx, s.d.rebind(sqlText), args...)
	if err != nil {
		return nil, s.dbErr("query", err)
	}
	return rows, nil
}

func ipArg(ip net.IP) any {
	if ip == nil {
		return nil
	}
	return ip.String()
}

func strArg(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func parseIP(ns sql.NullString) net.IP {
	if !ns.Valid {
		return nil
	}
	return net.ParseIP(ns.String).To4()
}

func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
