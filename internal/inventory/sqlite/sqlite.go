package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/internal/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// FileName is the database's name inside the data directory.
const FileName = "inventory.db"

// readers is the size of the read-only pool. API reads are rare and
// small, so a few connections are plenty.
const readers = 4

var dialect = &sqldb.Dialect{
	Name:      "sqlite",
	TimeArg:   sqldb.UnixMicro,
	Violation: violation,
}

// Open opens (creating if needed) the database at path and migrates it to
// the current schema.
func Open(ctx context.Context, path string) (inventory.Store, error) {
	w, err := openPool(path, 1, "_txlock=immediate")
	if err != nil {
		return nil, err
	}
	// Migrate before the readers open, so they see the final schema.
	ms, err := loadMigrations()
	if err == nil {
		err = sqldb.Migrate(ctx, w, dialect, ms)
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("inventory database %s: %w", path, err)
	}
	r, err := openPool(path, readers, "_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, err
	}
	return sqldb.New(w, r, dialect), nil
}

func loadMigrations() ([]sqldb.Migration, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return sqldb.LoadMigrations(sub)
}

func openPool(path string, conns int, extra string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Another process (an admin's sqlite3 shell) may hold the lock briefly.
	q.Add("_pragma", "busy_timeout(5000)")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode() + "&" + extra
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open inventory database %s: %w", path, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open inventory database %s: %w (is the data directory writable, and is the file a SQLite database?)", path, err)
	}
	return db, nil
}

// "UNIQUE constraint failed: machines.name" names the column.
var columnRE = regexp.MustCompile(`constraint failed: \w+\.(\w+)`)

func violation(err error) (kind, column string, ok bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return "", "", false
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		kind = "unique"
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		kind = "foreign"
	default:
		return "", "", false
	}
	if m := columnRE.FindStringSubmatch(se.Error()); m != nil {
		column = m[1]
	}
	return kind, column, true
}
