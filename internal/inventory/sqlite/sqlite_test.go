package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/internal/sqldb"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
)

type backend struct{}

func (backend) New(t *testing.T) inventory.Store {
	return open(t, filepath.Join(t.TempDir(), FileName))
}

func (backend) Reopen(t *testing.T, s inventory.Store) inventory.Store {
	path := pathOf[s]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, path)
}

var pathOf = map[inventory.Store]string{}

func open(t *testing.T, path string) inventory.Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	pathOf[s] = path
	t.Cleanup(func() { s.Close(); delete(pathOf, s) })
	return s
}

func TestStore(t *testing.T) { storetest.Run(t, backend{}) }

func TestPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	open(t, path)
	db, err := openPool(path, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tt := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"foreign_keys", "1"},
	} {
		var got string
		if err := db.QueryRow("PRAGMA " + tt.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("PRAGMA %s = %s, want %s", tt.pragma, got, tt.want)
		}
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRow("SELECT MAX(version) FROM schema_migrations").Scan(&v); err != nil || v != ms[len(ms)-1].Version {
		t.Fatalf("schema version %d (%v), want %d", v, err, ms[len(ms)-1].Version)
	}
}

// migrated opens the database at path with only the migrations pick
// chooses applied, as an older bootfleet left it.
func migrated(t *testing.T, path string, pick func([]sqldb.Migration) []sqldb.Migration) *sql.DB {
	t.Helper()
	w, err := openPool(path, 1, "_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if err := sqldb.Migrate(context.Background(), w, dialect, pick(ms)); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestUpgradeKeepsProfiles: a database of schema version 2 opens with its
// profiles booting their own kernels (root_kernel empty).
func TestUpgradeKeepsProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	w := migrated(t, path, func(ms []sqldb.Migration) []sqldb.Migration { return ms[:2] })
	if _, err := w.Exec(`INSERT INTO profiles (name, kernel, root_image, overlay) VALUES ('lab', '/k', 'debian', 'persistent')`); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := open(t, path)
	p, err := s.GetProfile(context.Background(), "lab")
	if err != nil {
		t.Fatal(err)
	}
	if p.Kernel != "/k" || p.Root.Image != "debian" || p.Root.Kernel != "" {
		t.Fatalf("profile after upgrade = %+v, want kernel /k, root image debian and no root kernel", p)
	}
}

// TestLateLowerMigration: a migration numbered below one already applied
// (two features that reserved numbers, landing out of order) still runs.
func TestLateLowerMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	w := migrated(t, path, func(ms []sqldb.Migration) []sqldb.Migration { return append(ms[:2:2], ms[3:]...) })
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	open(t, path)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(ms) {
		t.Fatalf("%d migrations recorded (%v), want all %d", n, err, len(ms))
	}
	if _, err := db.Exec(`SELECT root_kernel FROM profiles`); err != nil {
		t.Fatalf("migration 3, applied late, did not run: %v", err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (99, '0099_future', 'x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("opening a newer schema: %v, want an error naming version 99", err)
	}
}

func TestOpenInMissingDirectory(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "no", "such", FileName))
	if err == nil || !strings.Contains(err.Error(), "data directory") {
		t.Fatalf("got %v, want an error that points at the data directory", err)
	}
}

// TestAuditBounded: the trail keeps only the newest entries, so a token
// retrying a refused change in a loop cannot fill the disk.
func TestAuditBounded(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), FileName))
	s.(*sqldb.Store).SetAuditKeep(3)
	for i := range 5 {
		e := inventory.AuditEntry{Token: "loop", Route: "DELETE /profiles/{name}", Summary: strconv.Itoa(i), Status: 403}
		if err := s.AddAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListAudit(context.Background(), inventory.AuditFilter{})
	if err != nil || len(got) != 3 || got[0].Summary != "4" || got[2].Summary != "2" {
		t.Fatalf("after 5 entries with a bound of 3: %+v (%v), want 4, 3, 2", got, err)
	}
}

// TestUpgradeMakesVersions: an image imported before versions opens as
// its version 1, in production and current, and the next import is 2.
func TestUpgradeMakesVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	w := migrated(t, path, func(ms []sqldb.Migration) []sqldb.Migration {
		return slices.DeleteFunc(ms, func(m sqldb.Migration) bool { return m.Version >= 17 })
	})
	sha := strings.Repeat("ab", 32)
	if _, err := w.Exec(`INSERT INTO images (name, sha256, size, imported) VALUES ('debian', ?, 4096, 1700000000000000)`, sha); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := open(t, path)
	c := context.Background()
	vs, err := s.ListImageVersions(c, "debian")
	if err != nil || len(vs) != 1 || vs[0].Version != 1 || vs[0].SHA256 != sha || vs[0].State != inventory.VersionProduction ||
		vs[0].Promoted.IsZero() {
		t.Fatalf("versions after upgrade = %+v (%v), want version 1 of %.8s in production", vs, err, sha)
	}
	img, err := s.PutImage(c, inventory.Image{Name: "debian", SHA256: strings.Repeat("cd", 32), Size: 4096})
	if err != nil || img.Version != 2 {
		t.Fatalf("import after upgrade = %+v (%v), want version 2", img, err)
	}
}
