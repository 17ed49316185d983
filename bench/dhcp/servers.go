package dhcp

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// target is one DHCP server under test. start brings up a fresh instance
// (empty lease store) with its files under dir.
type target struct {
	Name       string
	Durability string // what "lease written" means for this server, for the report
	Command    string // the server command, for the report
	start      func(ctx context.Context, dir string) (*harness.Proc, error)
}

func (t *target) run(ctx context.Context, dir string) (*harness.Proc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return t.start(ctx, dir)
}

// bootfleetConfig writes bootfleetConfigText and the placeholder iPXE
// binaries serve insists on (nothing boots here).
func bootfleetConfig(dir string) (string, error) {
	ipxe := filepath.Join(dir, "ipxe")
	if err := os.MkdirAll(ipxe, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"ipxe.efi", "undionly.kpxe"} {
		if err := os.WriteFile(filepath.Join(ipxe, f), []byte("placeholder"), 0o644); err != nil {
			return "", err
		}
	}
	p := filepath.Join(dir, "bootfleet.yaml")
	return p, os.WriteFile(p, []byte(bootfleetConfigText(dir)), 0o644)
}

func bootfleetSQLite(bin string) *target {
	return &target{
		Name:       "bootfleet (SQLite)",
		Durability: "lease committed to SQLite (WAL, synchronous=FULL: fsync) before the ACK",
		Command:    bin + " serve --config DIR/bootfleet.yaml",
		start: func(_ context.Context, dir string) (*harness.Proc, error) {
			cfg, err := bootfleetConfig(dir)
			if err != nil {
				return nil, err
			}
			return harness.Start("dhcp-server", nsServer, filepath.Join(dir, "server.log"), nil, bin, "serve", "--config", cfg)
		},
	}
}

// pg is the throwaway PostgreSQL cluster of scripts/pg-test.sh, started in
// the server namespace so bootfleet reaches it on that namespace's loopback.
type pg struct {
	script, dsn, dir string
	port             string
	runs             int
}

var exportRE = regexp.MustCompile(`(?m)^export (\w+)='([^']*)'$`)

// startPG starts the cluster in namespace ns. It listens on 127.0.0.1
// and on extra (addresses of ns), where clients of network hba may log
// in with the password too.
func startPG(ctx context.Context, script, ns string, extra []string, hba string) (*pg, error) {
	out, err := harness.Output(ctx, "ip", "netns", "exec", ns, script, "start")
	if err != nil {
		return nil, fmt.Errorf("start PostgreSQL with %s: %w", script, err)
	}
	p := &pg{script: script}
	for _, m := range exportRE.FindAllStringSubmatch(out, -1) {
		switch m[1] {
		case "BOOTFLEET_TEST_PG":
			p.dsn = m[2]
		case "PGTEST_DIR":
			p.dir = m[2]
		}
	}
	u, err := url.Parse(p.dsn)
	if err != nil || p.dir == "" {
		return nil, fmt.Errorf("%s start printed %q; want export BOOTFLEET_TEST_PG=... and PGTEST_DIR=...", script, out)
	}
	p.port = u.Port()
	// pg-test.sh runs with fsync off (test data) and sets it on the command
	// line, where ALTER SYSTEM cannot override it. A lease server's numbers
	// mean something only with commits on disk: restart the cluster with
	// the same options minus those two (fsync and full_page_writes default on).
	bin, err := pgBin()
	if err == nil && hba != "" {
		err = appendLine(filepath.Join(p.dir, "data", "pg_hba.conf"), "host all all "+hba+" scram-sha-256")
	}
	if err == nil {
		listen := strings.Join(append([]string{"127.0.0.1"}, extra...), ",")
		err = harness.Sh(ctx, "ip", "netns", "exec", ns, "runuser", "-u", "postgres", "--",
			filepath.Join(bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "server.log"),
			"-w", "-t", "60", "-m", "fast", "restart",
			"-o", fmt.Sprintf("-c listen_addresses=%s -p %s -k %s -c max_connections=50", listen, p.port, p.dir))
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("restart PostgreSQL with fsync on: %w", err)
	}
	return p, nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pgBin is the newest installed PostgreSQL's bin directory, as pg-test.sh
// picks it.
func pgBin() (string, error) {
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(ds) == 0 {
		return "", fmt.Errorf("no /usr/lib/postgresql/*/bin; install postgresql")
	}
	sort.Slice(ds, func(i, j int) bool { return pgMajor(ds[i]) < pgMajor(ds[j]) })
	return ds[len(ds)-1], nil
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (p *pg) psql(ctx context.Context, q string) error {
	return harness.Sh(ctx, "runuser", "-u", "postgres", "--", "psql", "-q", "-X", "-v", "ON_ERROR_STOP=1",
		"-h", p.dir, "-p", p.port, "-U", "postgres", "-d", "postgres", "-c", q)
}

// settings reads back what the cluster really runs with, for the report.
func (p *pg) settings(ctx context.Context) string {
	out, err := harness.Output(ctx, "runuser", "-u", "postgres", "--", "psql", "-X", "-At", "-h", p.dir, "-p", p.port,
		"-U", "postgres", "-d", "postgres", "-c",
		"SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes','server_version')")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(out)
}

// freshDSN creates an empty database for one run.
func (p *pg) freshDSN(ctx context.Context) (string, error) {
	p.runs++
	db := fmt.Sprintf("bf_dhcpbench_%d", p.runs)
	if err := p.psql(ctx, "CREATE DATABASE "+db+" OWNER bootfleet"); err != nil {
		return "", err
	}
	u, _ := url.Parse(p.dsn)
	u.Path = "/" + db
	return u.String(), nil
}

func (p *pg) stop() {
	if p.dir != "" {
		harness.Sh(context.Background(), p.script, "stop", p.dir)
	}
}

func bootfleetPostgres(bin string, db *pg) *target {
	return &target{
		Name:       "bootfleet (PostgreSQL)",
		Durability: "lease committed to PostgreSQL (fsync=on, synchronous_commit=on) before the ACK",
		Command:    bin + " serve --config DIR/bootfleet.yaml --store postgres://bootfleet:...@127.0.0.1:PORT/bf_dhcpbench_N",
		start: func(ctx context.Context, dir string) (*harness.Proc, error) {
			cfg, err := bootfleetConfig(dir)
			if err != nil {
				return nil, err
			}
			dsn, err := db.freshDSN(ctx)
			if err != nil {
				return nil, err
			}
			return harness.Start("dhcp-server", nsServer, filepath.Join(dir, "server.log"), nil, bin, "serve", "--config", cfg, "--store", dsn)
		},
	}
}

// keaConfig: memfile with persist on and lease file cleanup (LFC) off, so
// the CSV only grows by appends during a run; Kea's default threading.
const keaConfig = `{"Dhcp4": {
  "interfaces-config": {"interfaces": ["%s"], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "name": "%s", "lfc-interval": 0},
  "valid-lifetime": 3600,
  "subnet4": [{"id": 1, "subnet": "%s/%d", "pools": [{"pool": "%s - %s"}]}],
  "loggers": [{"name": "kea-dhcp4", "severity": "WARN", "output_options": [{"output": "stderr"}]}]
}}
`

func kea(bin string) *target {
	return &target{
		Name:       "Kea kea-dhcp4 (memfile)",
		Durability: "each lease appended to the memfile CSV with write(), never fsynced (strace: no fsync calls): survives kill -9, not power loss",
		Command:    "KEA_PIDFILE_DIR=DIR KEA_LOCKFILE_DIR=DIR " + bin + " -c DIR/kea-dhcp4.json",
		start: func(_ context.Context, dir string) (*harness.Proc, error) {
			c := fmt.Sprintf(keaConfig, vethServer, filepath.Join(dir, "kea-leases4.csv"),
				"10.216.0.0", prefixLen, poolFirst, poolLast)
			p := filepath.Join(dir, "kea-dhcp4.json")
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				return nil, err
			}
			return harness.Start("dhcp-server", nsServer, filepath.Join(dir, "server.log"),
				[]string{"KEA_PIDFILE_DIR=" + dir, "KEA_LOCKFILE_DIR=" + dir}, bin, "-c", p)
		},
	}
}

func dnsmasqArgs(bin, dir string) []string {
	return []string{bin, "-k", "--conf-file=/dev/null", "--port=0", "--interface=" + vethServer, "--bind-interfaces",
		fmt.Sprintf("--dhcp-range=%s,%s,255.255.0.0,1h", poolFirst, poolLast),
		"--dhcp-leasefile=" + filepath.Join(dir, "dnsmasq.leases"), "--dhcp-lease-max=1000000",
		"--quiet-dhcp", "--no-ping", "--pid-file=" + filepath.Join(dir, "dnsmasq.pid")}
}

func dnsmasq(bin string) *target {
	return &target{
		Name:       "dnsmasq",
		Durability: "whole lease file rewritten and fsynced before the ACK (seen with strace)",
		Command:    strings.Join(dnsmasqArgs(bin, "DIR"), " "),
		start: func(_ context.Context, dir string) (*harness.Proc, error) {
			return harness.Start("dhcp-server", nsServer, filepath.Join(dir, "server.log"), nil, dnsmasqArgs(bin, dir)...)
		},
	}
}
