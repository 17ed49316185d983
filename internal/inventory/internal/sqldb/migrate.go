package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one embedded schema step, from a file named
// NNNN_description.sql. Versions start at 1 and have no gaps.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads every *.sql file at the top of fsys.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, n := range names {
		num, _, ok := strings.Cut(n, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: want a name like 0001_init.sql", n)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(n, ".sql"), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d, got %d (versions must be 1, 2, 3... without gaps)", m.Name, i+1, m.Version)
		}
	}
	return ms, nil
}

// Migrate brings the schema up to the last of ms in one transaction and
// records each step in schema_migrations. It refuses a database migrated by
// a newer bootfleet, whose schema this one does not understand.
func Migrate(ctx context.Context, db *sql.DB, d *Dialect, ms []Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migration: %w", d.Name, err)
	}
	defer tx.Rollback()
	if d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.MigrationLock); err != nil {
			return fmt.Errorf("%s: lock for migration: %w", d.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: create schema_migrations: %w", d.Name, err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("%s: read schema version: %w", d.Name, err)
	}
	if cur > len(ms) {
		return fmt.Errorf("%s: database schema is at version %d but this bootfleet knows only up to %d; run a bootfleet at least as new as the one that last used this database", d.Name, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: migration %s: %w", d.Name, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
			m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return fmt.Errorf("%s: record migration %s: %w", d.Name, m.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit migrations: %w", d.Name, err)
	}
	return nil
}
