package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
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
	// Other tests start clusters too: begin the script's search for a
	// free port at a random one, and try again if another cluster took
	// it between the script's probe and its start.
	var out []byte
	var stderr bytes.Buffer
	for attempt := 1; ; attempt++ {
		stderr.Reset()
		cmd := exec.Command(script, "start")
		cmd.Env = append(os.Environ(), fmt.Sprintf("PGTEST_PORT=%d", 5500+rand.IntN(400)))
		cmd.Stderr = &stderr
		var err error
		if out, err = cmd.Output(); err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("%s start, %d times: %v\n%s", script, attempt, err, stderr.String())
		}
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
