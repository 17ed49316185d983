package postgres

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startErr says why no test database is available, for the tests to report.
var startErr error

// TestMain provides BOOTFLEET_TEST_PG when it is unset: as root it starts a
// throwaway cluster with scripts/pg-test.sh (installing PostgreSQL from
// Debian if needed) and stops it afterwards.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("BOOTFLEET_TEST_PG") != "" {
		return m.Run()
	}
	if os.Geteuid() != 0 {
		startErr = fmt.Errorf("BOOTFLEET_TEST_PG is unset and not running as root, so scripts/pg-test.sh cannot start PostgreSQL; set BOOTFLEET_TEST_PG to a DSN or run as root")
		return m.Run()
	}
	script := filepath.Join("..", "..", "..", "scripts", "pg-test.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "start")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		startErr = fmt.Errorf("%s start: %w\n%s", script, err, stderr.String())
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
		startErr = fmt.Errorf("%s start printed no BOOTFLEET_TEST_PG:\n%s%s", script, out, stderr.String())
		return m.Run()
	}
	os.Setenv("BOOTFLEET_TEST_PG", env["BOOTFLEET_TEST_PG"])
	return m.Run()
}

// testDSN returns the DSN or ends the test: skipped on a developer machine,
// failed in CI (BOOTFLEET_CI=1), where PostgreSQL must be there.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("BOOTFLEET_TEST_PG")
	if dsn != "" {
		return dsn
	}
	if os.Getenv("BOOTFLEET_CI") != "" {
		t.Fatalf("no PostgreSQL for the store tests: %v", startErr)
	}
	t.Skipf("no PostgreSQL for the store tests: %v", startErr)
	return ""
}
