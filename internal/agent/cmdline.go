package agent

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

// CmdlineRootKey is the kernel command line parameter naming the root export.
const CmdlineRootKey = "bootfleet.root"

// DefaultDeadConnTimeout is how long the kernel holds I/O while the watcher
// reconnects a dead NBD socket, unless bootfleet.nbd.dead= says otherwise.
const DefaultDeadConnTimeout = 120 * time.Second

// DefaultIOTimeout is the kernel's per-request timeout (NBD_ATTR_TIMEOUT)
// unless bootfleet.nbd.timeout= says otherwise. It must not be 0: with no
// timeout the kernel never resends requests that were in flight when a
// connection died, so they would hang even after a reconnect. It is the
// longest a machine's I/O stalls when its server dies under a request
// (the kernel resends such requests only when they time out, even after
// the watcher has failed over in milliseconds), so it is short; a request
// that a live but overloaded server takes longer to answer costs a
// reconnect, never an error.
const DefaultIOTimeout = 10 * time.Second

// Server is one NBD server's address.
type Server struct {
	Host string // IP address or host name, without brackets
	Port int    // 1..65535
}

// Addr is Host:Port in the form net.Dial wants.
func (s Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Target is the NBD export the root file system lives on, and the servers
// that serve it.
type Target struct {
	Host   string // the first server: IP address or host name, without brackets
	Port   int    // the first server's port, 1..65535
	Export string // export name: bootfleet's per-boot secret
	// Fallbacks are the other servers that accept Export, in the order
	// the agent fails over to them when its connection dies.
	Fallbacks []Server
}

// MaxServers bounds the servers one bootfleet.root= may name.
const MaxServers = 16

// Servers is every server of the target, the first one first.
func (t Target) Servers() []Server {
	return append([]Server{{Host: t.Host, Port: t.Port}}, t.Fallbacks...)
}

// Addr is the first server's Host:Port in the form net.Dial wants.
func (t Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// String is the command line form, nbd:HOST:PORT[,HOST:PORT...]:EXPORT,
// with the export name left out so logs do not carry the secret.
func (t Target) String() string { return "nbd:" + t.addrs() + ":<export>" }

// Arg is the value of bootfleet.root= that names t, secret included.
func (t Target) Arg() string { return "nbd:" + t.addrs() + ":" + t.Export }

func (t Target) addrs() string {
	var b strings.Builder
	for i, s := range t.Servers() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s.Addr())
	}
	return b.String()
}

// Options is what the agent reads from the kernel command line.
type Options struct {
	Root       Target
	FSType     string           // bootfleet.rootfstype=; default: what diskprobe finds
	RootPart   diskprobe.Choice // bootfleet.root.part=N|PARTUUID=U|LABEL=L; default: automatic
	RootFlags  string           // bootfleet.rootflags=, mount data, default none
	ReadOnly   bool             // bootfleet.ro: mount the root read-only
	Init       string           // bootfleet.init=, default /sbin/init
	DeadConn   time.Duration    // bootfleet.nbd.dead=SECONDS
	IOTimeout  time.Duration    // bootfleet.nbd.timeout=SECONDS, 1..3600
	Shell      bool             // bootfleet.shell: on failure, run /bin/sh instead of powering off
	DeviceName string           // NBD device, always nbd0 for now
	// Milestones is bootfleet.milestones=URL: the agent GETs URL/NAME at
	// each step, so the server's boot record shows them. Empty: none sent.
	Milestones string
	// Identity is bootfleet.identity=URL: the agent fetches the machine's
	// identity there (host name, machine-id, SSH host keys, files) and
	// writes it into the new root. Empty: the root is left as it is.
	Identity string
	// Cache is bootfleet.overlay=, bootfleet.cache= and
	// bootfleet.cache.size=: a copy-on-write cache over a read-only root.
	Cache CacheOptions
}

// ErrNoRoot means the command line has no bootfleet.root=.
var ErrNoRoot = errors.New("no " + CmdlineRootKey + "= on the kernel command line")

// ParseCmdline reads the agent's options from a kernel command line
// (/proc/cmdline). Later occurrences of a key win, as with the kernel's own
// parameters. Quoted values ("a b") are not supported; none of ours need spaces.
func ParseCmdline(cmdline string) (Options, error) {
	o := Options{Init: "/sbin/init", DeadConn: DefaultDeadConnTimeout, IOTimeout: DefaultIOTimeout, DeviceName: "nbd0"}
	var root string
	for _, w := range strings.Fields(cmdline) {
		k, v, hasValue := strings.Cut(w, "=")
		switch k {
		case CmdlineRootKey:
			root = v
		case "bootfleet.rootfstype":
			o.FSType = v
		case "bootfleet.root.part":
			c, err := diskprobe.ParseChoice(v)
			if err != nil {
				return o, fmt.Errorf("bootfleet.root.part=%q: %w", v, err)
			}
			o.RootPart = c
		case "bootfleet.rootflags":
			o.RootFlags = v
		case "bootfleet.ro":
			o.ReadOnly = !hasValue || v == "1" || v == "true"
		case "bootfleet.init":
			o.Init = v
		case "bootfleet.milestones":
			if !strings.HasPrefix(v, "http://") {
				return o, fmt.Errorf("bootfleet.milestones=%q: want an http:// URL", v)
			}
			o.Milestones = strings.TrimSuffix(v, "/")
		case "bootfleet.identity":
			if !strings.HasPrefix(v, "http://") {
				return o, fmt.Errorf("bootfleet.identity=%q: want an http:// URL", v)
			}
			o.Identity = v
		case "bootfleet.overlay", "bootfleet.cache", "bootfleet.cache.size":
			if err := o.Cache.set(k, v); err != nil {
				return o, err
			}
		case "bootfleet.shell":
			o.Shell = !hasValue || v == "1" || v == "true"
		case "bootfleet.nbd.dead":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 86400 {
				return o, fmt.Errorf("bootfleet.nbd.dead=%q: want seconds from 0 to 86400", v)
			}
			o.DeadConn = time.Duration(n) * time.Second
		case "bootfleet.nbd.timeout":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 3600 {
				return o, fmt.Errorf("bootfleet.nbd.timeout=%q: want seconds from 1 to 3600", v)
			}
			o.IOTimeout = time.Duration(n) * time.Second
		}
	}
	if err := o.Cache.check(); err != nil {
		return o, err
	}
	if root == "" {
		return o, ErrNoRoot
	}
	t, err := ParseTarget(root)
	if err != nil {
		return o, err
	}
	o.Root = t
	if !strings.HasPrefix(o.Init, "/") {
		return o, fmt.Errorf("bootfleet.init=%q: want an absolute path in the root image", o.Init)
	}
	return o, nil
}

// ParseTarget parses nbd:HOST:PORT:EXPORT, or with several servers that
// all serve the export, nbd:HOST:PORT,HOST:PORT,...:EXPORT (at most
// MaxServers), in the order to try them. HOST may be an IPv6 address in
// brackets; EXPORT is everything after the colon that ends the last port
// (it may hold colons and commas) and must not be empty, since bootfleet
// never serves a default export.
func ParseTarget(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%s=%q: %s; want nbd:HOST:PORT[,HOST:PORT...]:EXPORT, e.g. nbd:10.0.0.1:10809,10.0.0.2:10809:abc123 (check the profile's root and the server_ip)", CmdlineRootKey, s, why)
	}
	rest, ok := strings.CutPrefix(s, "nbd:")
	if !ok {
		return bad("no nbd: scheme")
	}
	var servers []Server
	for {
		var host string
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]:")
			if end < 0 {
				return bad("unterminated [IPv6] host")
			}
			host, rest = rest[1:end], rest[end+2:]
		} else {
			var found bool
			host, rest, found = strings.Cut(rest, ":")
			if !found {
				return bad("no port")
			}
		}
		if host == "" {
			return bad("empty host")
		}
		if strings.ContainsAny(host, ",[]/ \t") {
			return bad(fmt.Sprintf("host %q is not an address or a name", host))
		}
		end := strings.IndexAny(rest, ",:")
		if end < 0 {
			return bad("no export name")
		}
		port := rest[:end]
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return bad(fmt.Sprintf("port %q is not 1..65535", port))
		}
		if len(servers) == MaxServers {
			return bad(fmt.Sprintf("more than %d servers", MaxServers))
		}
		servers = append(servers, Server{Host: host, Port: n})
		sep := rest[end]
		rest = rest[end+1:]
		if sep == ':' {
			break
		}
	}
	if rest == "" {
		return bad("empty export name")
	}
	t := Target{Host: servers[0].Host, Port: servers[0].Port, Export: rest}
	if len(servers) > 1 {
		t.Fallbacks = servers[1:]
	}
	return t, nil
}
