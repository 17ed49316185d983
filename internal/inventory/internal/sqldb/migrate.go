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
// NNNN_description.sql. Versions start at 1 and are unique. They may have
// gaps: features developed side by side reserve their numbers, and one
// may land before a lower number does. Migrate applies every version a
// database has not seen, so the lower one still runs when it arrives.
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
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s: both have version %d; renumber one", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}

// Migrate applies, in version order and in one transaction, every one of
// ms that schema_migrations does not list, and records each. It refuses a
// database that lists a version ms lacks: a newer bootfleet migrated it,
// and this one does not understand its schema.
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
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return fmt.Errorf("%s: read schema version: %w", d.Name, err)
	}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.Version] = true
	}
	for v := range applied {
		if !known[v] {
			return fmt.Errorf("%s: database schema has version %d, which this bootfleet does not know (it knows %d migrations); run a bootfleet at least as new as the one that last used this database", d.Name, v, len(ms))
		}
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
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

func appliedVersions(ctx context.Context, tx *sql.Tx) (map[int]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		applied[v] = true
	}
	return applied, rows.Err()
}
