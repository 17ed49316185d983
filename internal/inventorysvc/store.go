package inventorysvc

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/postgres"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
)

// OpenStore opens the store spec names: "" for SQLite in the data
// directory data (inventory.db), a postgres:// DSN, or a SQLite file path.
func OpenStore(ctx context.Context, spec, data string) (inventory.Store, error) {
	switch {
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return postgres.Open(ctx, spec)
	case spec == "":
		return sqlite.Open(ctx, filepath.Join(data, sqlite.FileName))
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("--store %q: want empty (SQLite in the data directory), a SQLite file path or postgres://user:pass@host/db", spec)
	}
	return sqlite.Open(ctx, spec)
}

// Shared says whether spec names a store several servers can share
// (PostgreSQL): servers on one such store are one fleet.
func Shared(spec string) bool { return backend(spec) == "postgres" }

// backend names the kind of store spec opens, for logs.
func backend(spec string) string {
	if strings.Contains(spec, "://") {
		return "postgres"
	}
	return "sqlite"
}
