package rootarg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Key is the kernel command line parameter naming the root export.
const Key = "bootfleet.root"

// MaxServers bounds the servers one bootfleet.root= may name.
const MaxServers = 16

// ErrNoRoot means the command line has no bootfleet.root=.
var ErrNoRoot = errors.New("no " + Key + "= on the kernel command line")

// Server is one NBD server's address.
type Server struct {
	Host string // IP address or host name, without brackets
	Port int    // 1..65535
}

// IPv6 says whether Host is an IPv6 address; a host name is neither
// family until it is resolved.
func (s Server) IPv6() bool {
	a, err := netip.ParseAddr(s.Host)
	return err == nil && a.Is6() && !a.Is4In6()
}

// IPv4 says whether Host is an IPv4 address.
func (s Server) IPv4() bool {
	a, err := netip.ParseAddr(s.Host)
	return err == nil && a.Unmap().Is4()
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

// FromCmdline parses the last bootfleet.root= of a kernel command line
// (later occurrences win, as with the kernel's own parameters). It returns
// ErrNoRoot when there is none or its value is empty.
func FromCmdline(cmdline string) (Target, error) {
	var root string
	for _, w := range strings.Fields(cmdline) {
		if k, v, _ := strings.Cut(w, "="); k == Key {
			root = v
		}
	}
	if root == "" {
		return Target{}, ErrNoRoot
	}
	return Parse(root)
}

// Parse parses nbd:HOST:PORT:EXPORT, or with several servers that all
// serve the export, nbd:HOST:PORT,HOST:PORT,...:EXPORT (at most
// MaxServers), in the order to try them. HOST is an IPv4 address, a host
// name, or an IPv6 address in brackets ([fd00::1]:10809), and the list may
// mix families; EXPORT is everything after the colon that ends the last port
// (it may hold colons and commas) and must not be empty, since bootfleet
// never serves a default export.
func Parse(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%s=%q: %s; want nbd:HOST:PORT[,HOST:PORT...]:EXPORT, e.g. nbd:10.0.0.1:10809,10.0.0.2:10809:abc123 (check the profile's root and the server_ip)", Key, s, why)
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
			// Brackets are for IPv6 literals only, so that a server's
			// family is known from the argument alone (the agent sets up
			// the families its servers need before it dials).
			if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || a.Is4In6() {
				return bad(fmt.Sprintf("[%s] is not an IPv6 address", host))
			}
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
