package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// serverSpec says how to run one server. Each peer is run the way its
// Debian package would run it, with only the limits raised that would
// otherwise refuse 200 concurrent clients (noted in the report).
type serverSpec struct {
	name string
	tftp bool // takes part in the TFTP cases
	http bool // takes part in the HTTP case
	bin  string
	// argv builds the command line for topology t; it may write config files into dir.
	argv func(b *bench, t *Topology, dir string) ([]string, error)
	// urlPath maps a file name to its HTTP path.
	urlPath func(name string) string
	version func(bin string) string
	note    string
}

func specs(o *options) []*serverSpec {
	return []*serverSpec{
		{name: "bootfleet", tftp: true, http: true, bin: o.bootfleet, argv: bootfleetArgv,
			urlPath: func(n string) string { return "/files/" + n },
			version: fileVersion,
			note:    "dhcp.mode off, defaults otherwise (max_window 64, cache_mb 512, blksize clamped to the MTU)"},
		{name: "dnsmasq", tftp: true, bin: "dnsmasq", argv: dnsmasqArgv, version: firstLine("--version"),
			note: "--tftp-max raised from its default of 50 so that 200 clients are served at all"},
		{name: "tftp-hpa", tftp: true, bin: o.hpa, argv: hpaArgv, version: firstLine("-V"),
			note: "forks one process per transfer; defaults otherwise"},
		{name: "atftpd", tftp: true, bin: "atftpd", argv: atftpdArgv, version: firstLine("--version"),
			note: "--maxthread raised from 100; --retry-timeout lowered from 5 s to the 1 s dnsmasq and tftp-hpa use"},
		{name: "nginx", http: true, bin: "nginx", argv: nginxArgv, version: firstLine("-v"),
			urlPath: func(n string) string { return "/" + n },
			note:    "sendfile on, tcp_nopush on, keep-alive, access_log off, worker_processes auto"},
	}
}

func bootfleetArgv(b *bench, t *Topology, dir string) ([]string, error) {
	// bootfleet checks its iPXE binaries at start, and refuses Debian's
	// ipxe.efi, an absolute symlink to /boot. The bench serves no iPXE, so a
	// private copy of the resolved files (or a stand-in) is enough.
	ipxeDir := filepath.Join(dir, "ipxe")
	if err := os.MkdirAll(ipxeDir, 0o755); err != nil {
		return nil, err
	}
	for _, n := range []string{"ipxe.efi", "undionly.kpxe"} {
		data, err := os.ReadFile(filepath.Join("/usr/lib/ipxe", n))
		if err != nil {
			data = []byte("bench stand-in for " + n)
		}
		if err := os.WriteFile(filepath.Join(ipxeDir, n), data, 0o644); err != nil {
			return nil, err
		}
	}
	cfg := filepath.Join(dir, "bootfleet-"+t.Name+".yaml")
	y := fmt.Sprintf(`# written by bench: TFTP and HTTP only
data: %s
server_ip: %s
dhcp:
  mode: "off"
tftp:
  listen: "%s:69"
  root: %s
http:
  listen: "%s:8080"
ipxe:
  dir: %s
log:
  level: warn
`, filepath.Join(dir, "bootfleet-data"), t.ServerIP, t.ServerIP, b.root, t.ServerIP, ipxeDir)
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		return nil, err
	}
	return []string{b.opt.bootfleet, "serve", "--config", cfg}, nil
}

func dnsmasqArgv(b *bench, t *Topology, dir string) ([]string, error) {
	return []string{"dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
		"--port=0", "--enable-tftp", "--tftp-root=" + b.root, "--tftp-max=1000", "--user=root",
		"--pid-file=", "--log-facility=" + filepath.Join(dir, "dnsmasq-"+t.Name+".log")}, nil
}

func hpaArgv(b *bench, t *Topology, dir string) ([]string, error) {
	// No -a: in.tftpd resolves it with AI_ADDRCONFIG, which fails for
	// 127.0.0.1 in a namespace that has only lo (exit 66, nothing logged).
	return []string{b.opt.hpa, "-L", "-u", "root", "-s", b.root}, nil
}

func atftpdArgv(b *bench, t *Topology, dir string) ([]string, error) {
	return []string{"atftpd", "--daemon", "--no-fork", "--user", "root", "--group", "root",
		"--port", "69", "--bind-address", t.ServerIP, "--maxthread", "1000", "--retry-timeout", "1",
		"--logfile", filepath.Join(dir, "atftpd-"+t.Name+".log"), b.root}, nil
}

func nginxArgv(b *bench, t *Topology, dir string) ([]string, error) {
	prefix := filepath.Join(dir, "nginx-"+t.Name)
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`daemon off;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 65;
  default_type application/octet-stream;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s;
  scgi_temp_path %[1]s;
  server {
    listen %[2]s:8080;
    root %[3]s;
  }
}
`, prefix, t.ServerIP, b.root)
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return []string{"nginx", "-p", prefix, "-e", filepath.Join(prefix, "error.log"), "-c", path}, nil
}

func firstLine(flag string) func(string) string {
	return func(bin string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, bin, flag).CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return strings.TrimSpace(line)
	}
}

// fileVersion identifies a binary with no release version by content and date.
func fileVersion(bin string) string {
	f, err := os.Open(bin)
	if err != nil {
		return "missing: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err.Error()
	}
	st, _ := f.Stat()
	return fmt.Sprintf("%s built %s, sha256 %s", bin, st.ModTime().UTC().Format(time.RFC3339), hex.EncodeToString(h.Sum(nil))[:12])
}

// server is one running server process (and its children).
type server struct {
	spec *serverSpec
	topo *Topology
	argv []string // full command line, including ip netns exec
	cmd  *exec.Cmd
	done chan struct{}
	log  string
	cg   *cgroup // nil when cgroup v2 is not available
}

// start runs spec in t and waits until it answers: a TFTP probe fetch or an
// HTTP request for the probe file.
func (b *bench) start(ctx context.Context, spec *serverSpec, t *Topology, asHTTP bool) (*server, error) {
	inner, err := spec.argv(b, t, b.work)
	if err != nil {
		return nil, fmt.Errorf("%s: prepare: %w", spec.name, err)
	}
	s := &server{spec: spec, topo: t, done: make(chan struct{}),
		argv: append([]string{"ip", "netns", "exec", t.ServerNS}, inner...),
		log:  filepath.Join(b.work, spec.name+"-"+t.Name+".out")}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Own process group: stop() then reaches forked children (tftp-hpa, nginx workers).
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", spec.name, shellJoin(s.argv), err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	// Before the server can fork per-transfer children, so they count too.
	s.cg = newCgroup(spec.name+"-"+t.Name, s.cmd.Process.Pid)

	deadline := time.Now().Add(8 * time.Second)
	for {
		select {
		case <-s.done:
			s.cg.remove()
			return nil, fmt.Errorf("%s exited at start: %s (log %s: %s)", spec.name, s.cmd.ProcessState, s.log, tailFile(s.log))
		case <-time.After(100 * time.Millisecond):
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var err error
		if asHTTP {
			err = b.httpProbe(pctx, s)
		} else {
			_, err = b.probe(pctx, s, 512, 1)
		}
		cancel()
		if err == nil {
			s.cg.adopt(s.cmd.Process.Pid)
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("%s did not answer within 8 s: %w (log %s: %s)", spec.name, err, s.log, tailFile(s.log))
		}
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after 3 s.
func (s *server) stop() {
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.done
	}
	// Children that outlived their parent are still in the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.cg.remove()
}

// cpu is the CPU seconds used so far by the server and all its descendants:
// per-transfer children (tftp-hpa) and workers (nginx) count, which the
// main PID's /proc stat alone would miss. tftp-hpa ignores SIGCHLD, so its
// children's time never reaches its cutime; a cgroup sees it.
func (s *server) cpu() float64 {
	if c, ok := s.cg.cpu(); ok {
		return c
	}
	return treeCPU(s.cmd.Process.Pid)
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), 400)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

var errNoOACK = errors.New("no OACK in atftp's trace")
