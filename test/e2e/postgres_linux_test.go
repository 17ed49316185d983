package e2e

import (
	"bytes"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startPostgres starts a throwaway PostgreSQL with scripts/pg-test.sh
// (which installs Debian's postgresql when it is missing), stopped in
// t.Cleanup, and returns a DSN for its Unix socket: the cluster listens on
// the host's loopback only, which the test's namespaces do not reach, but
// they share the file system.
func startPostgres(t *testing.T) string {
	t.Helper()
	script := filepath.Join(needEnv(t).repo, "scripts", "pg-test.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "start")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, stderr.String())
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			vars[k] = strings.Trim(v, "'")
		}
	}
	dir := vars["PGTEST_DIR"]
	if dir == "" {
		t.Fatalf("%s start printed no PGTEST_DIR:\n%s%s", script, out, stderr.String())
	}
	t.Cleanup(func() { exec.Command(script, "stop", dir).Run() })
	u, err := url.Parse(vars["BOOTFLEET_TEST_PG"])
	if err != nil || u.Scheme != "postgres" || u.User == nil || u.Port() == "" {
		t.Fatalf("%s start: BOOTFLEET_TEST_PG=%q: want postgres://USER:PW@HOST:PORT/DB", script, vars["BOOTFLEET_TEST_PG"])
	}
	return fmt.Sprintf("postgres://%s@%s?host=%s&port=%s&sslmode=disable", u.User.String(), u.Path, dir, u.Port())
}
