package testutil

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// pgStartErr says why no test database is available, for the tests to report.
var pgStartErr error

// PostgresMain runs m with BOOTFLEET_TEST_PG set: as it is, or, when it is
// unset and the test runs as root, to a throwaway cluster that
// scripts/pg-test.sh starts (installing PostgreSQL from Debian if needed)
// and stops afterwards. Call it from TestMain: os.Exit(PostgresMain(m)).
func PostgresMain(m *testing.M) int {
	if os.Getenv("BOOTFLEET_TEST_PG") != "" {
		return m.Run()
	}
	if os.Geteuid() != 0 {
		pgStartErr = fmt.Errorf("BOOTFLEET_TEST_PG is unset and not running as root, so scripts/pg-test.sh cannot start PostgreSQL; set BOOTFLEET_TEST_PG to a DSN or run as root")
		return m.Run()
	}
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "pg-test.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "start")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		pgStartErr = fmt.Errorf("%s start: %w\n%s", script, err, stderr.String())
		return m.Run()
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	if dir := env["PGTEST_DIR"]; dir != "" {
		defer exec.Command(script, "stop", dir).Run()
	}
	if env["BOOTFLEET_TEST_PG"] == "" {
		pgStartErr = fmt.Errorf("%s start printed no BOOTFLEET_TEST_PG:\n%s%s", script, out, stderr.String())
		return m.Run()
	}
	os.Setenv("BOOTFLEET_TEST_PG", env["BOOTFLEET_TEST_PG"])
	return m.Run()
}

// PostgresDSN returns the test database's DSN or ends the test: skipped
// on a developer machine, failed in CI (BOOTFLEET_CI=1), where PostgreSQL
// must be there.
func PostgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BOOTFLEET_TEST_PG")
	if dsn != "" {
		return dsn
	}
	if os.Getenv("BOOTFLEET_CI") != "" {
		t.Fatalf("no PostgreSQL for the store tests: %v", pgStartErr)
	}
	t.Skipf("no PostgreSQL for the store tests: %v", pgStartErr)
	return ""
}

var schemaSeq atomic.Int64

// FreshPostgres creates an empty schema for one test, dropped by
// t.Cleanup, and returns a DSN whose search_path points at it, so tests
// never see each other's rows.
func FreshPostgres(t *testing.T) string {
	t.Helper()
	dsn := PostgresDSN(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := fmt.Sprintf("bf_test_%d_%d", time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() { admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "search_path=" + schema
}
