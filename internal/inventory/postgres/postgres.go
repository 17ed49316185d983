package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/internal/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MaxConns bounds the connection pool. DHCP writes leases one at a time per
// server, so a handful is enough and spares the database server.
const MaxConns = 8

// migrationLockID is an arbitrary constant naming bootfleet's advisory lock.
const migrationLockID = 0x626f6f74 // "boot"

var dialect = &sqldb.Dialect{
	Name:          "postgres",
	Numbered:      true,
	TimeArg:       func(t time.Time) any { return t.UTC() },
	Violation:     violation,
	MigrationLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLockID),
}

// Open connects to the database named by dsn (postgres://user:pass@host/db
// or a key=value string) and migrates it to the current schema.
func Open(ctx context.Context, dsn string) (inventory.Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w; want a DSN like postgres://bootfleet:secret@db.example/bootfleet", err)
	}
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres store %s: %w (is the server running and the DSN's user, password and database right?)", redact(dsn), err)
	}
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		db.Close()
		return nil, err
	}
	ms, err := sqldb.LoadMigrations(sub)
	if err == nil {
		err = sqldb.Migrate(ctx, db, dialect, ms)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres store %s: %w", redact(dsn), err)
	}
	return sqldb.New(db, db, dialect), nil
}

// redact hides a password in a URL DSN so it never reaches the log.
func redact(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return "(key=value DSN)"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(rest[:at], ":"); hasPass {
			return scheme + "://" + user + ":xxxxx" + rest[at:]
		}
	}
	return dsn
}

// pkeys names the primary-key column of each table.
var pkeys = map[string]string{"machines_pkey": "mac", "leases_pkey": "mac", "profiles_pkey": "name"}

func violation(err error) (kind, column string, ok bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return "", "", false
	}
	switch pe.Code {
	case "23505": // unique_violation
		kind = "unique"
	case "23503": // foreign_key_violation
		kind = "foreign"
	default:
		return "", "", false
	}
	// Constraints are named TABLE_COLUMN_key (PostgreSQL's default, and
	// what the migrations use for indexes) or TABLE_pkey.
	column = pkeys[pe.ConstraintName]
	if column == "" && strings.HasSuffix(pe.ConstraintName, "_key") {
		if _, col, ok := strings.Cut(strings.TrimSuffix(pe.ConstraintName, "_key"), "_"); ok {
			column = col
		}
	}
	return kind, column, true
}
