package agent

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
	"github.com/bootfleet/bootfleet/internal/rootarg"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

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

// Options is what the agent reads from the kernel command line.
type Options struct {
	Root       rootarg.Target
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
	// Proxy is bootfleet.proxy=1|0: the kernel reads the root through the
	// agent (internal/rootproxy) rather than from a server's socket. On
	// by default when the server names a multicast group.
	Proxy bool
	// ReadCache is bootfleet.readcache=SIZE|N%|0: the proxy's read cache
	// of the base, in RAM. ReadCacheBytes and ReadCachePercent both zero
	// with ReadCacheSet false means DefaultReadCachePercent; set to zero,
	// no cache.
	ReadCacheBytes   int64
	ReadCachePercent int
	ReadCacheSet     bool
	// Multicast is bootfleet.mcast=: where the root's base is multicast;
	// zero when it is not.
	Multicast    rootarg.Multicast
	HasMulticast bool
	// OverlayBlocks is bootfleet.overlay.blocks=URL: where the agent
	// fetches the blocks its server-side overlay holds, with the export
	// name as its credential. Empty: the server sends none.
	OverlayBlocks string
	// ReadOrder is bootfleet.mcast.order=URL: where the agent reads the
	// order earlier boots read the content in, which its read-ahead
	// follows. Empty, or an order it cannot read: no read-ahead.
	ReadOrder string
	// ReadAhead is bootfleet.mcast.ahead=K: the most chunks of the order
	// past its reads the proxy asks the group for, the ceiling of its
	// read-ahead window; DefaultReadAhead unless set, 0 for none, at most
	// rootproxy.MaxReadAhead.
	ReadAhead int
}

// DefaultReadAhead is the ceiling of the read-ahead window, in 32 KiB
// chunks of the read order, unless bootfleet.mcast.ahead= says otherwise:
// far enough ahead that the group fills the next reads while the machine
// works, near enough that a boot leaving the learned order wastes little
// of every machine's link. The window starts at 2 chunks and is cut
// while the machine does not keep up with the group, so a slow machine
// asks less rather than losing what it asked.
const DefaultReadAhead = 16

// DefaultReadCachePercent is the share of RAM the proxy's read cache of
// the base takes unless bootfleet.readcache= says otherwise: the boot's
// working set of a Debian desktop fits in it on a 4 GiB machine.
const DefaultReadCachePercent = 10

// ParseCmdline reads the agent's options from a kernel command line
// (/proc/cmdline); without bootfleet.root= it returns rootarg.ErrNoRoot.
// Later occurrences of a key win, as with the kernel's own parameters. Quoted values ("a b") are not supported; none of ours need spaces.
func ParseCmdline(cmdline string) (Options, error) {
	o := Options{Init: "/sbin/init", DeadConn: DefaultDeadConnTimeout, IOTimeout: DefaultIOTimeout, DeviceName: "nbd0", ReadAhead: DefaultReadAhead}
	proxy := ""
	for _, w := range strings.Fields(cmdline) {
		k, v, hasValue := strings.Cut(w, "=")
		switch k {
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
		case "bootfleet.proxy":
			if v != "0" && v != "1" {
				return o, fmt.Errorf("bootfleet.proxy=%q: want 1 (read the root through the agent) or 0 (the kernel reads the server)", v)
			}
			proxy = v
		case "bootfleet.readcache":
			o.ReadCacheSet = true
			if v == "0" {
				o.ReadCacheBytes, o.ReadCachePercent = 0, 0
				break
			}
			n, pct, err := ParseCacheSize(v)
			if err != nil {
				return o, fmt.Errorf("bootfleet.readcache=%q: want 0 (none), a size of at least %d MiB like 512M, or a share of RAM like 10%%", v, MinCacheBytes>>20)
			}
			o.ReadCacheBytes, o.ReadCachePercent = n, pct
		case "bootfleet.overlay.blocks":
			if !strings.HasPrefix(v, "http://") {
				return o, fmt.Errorf("bootfleet.overlay.blocks=%q: want an http:// URL", v)
			}
			o.OverlayBlocks = v
		case rootarg.ReadOrderKey:
			if !strings.HasPrefix(v, "http://") {
				return o, fmt.Errorf("%s=%q: want an http:// URL", k, v)
			}
			o.ReadOrder = v
		case rootarg.ReadAheadKey:
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > rootproxy.MaxReadAhead {
				return o, fmt.Errorf("%s=%q: want chunks from 0 (no read-ahead) to %d", k, v, rootproxy.MaxReadAhead)
			}
			o.ReadAhead = n
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
	t, err := rootarg.FromCmdline(cmdline)
	if err != nil {
		return o, err
	}
	o.Root = t
	if o.Multicast, o.HasMulticast, err = rootarg.MulticastFromCmdline(cmdline); err != nil {
		return o, err
	}
	o.Proxy = proxy == "1" || proxy == "" && o.HasMulticast
	if !strings.HasPrefix(o.Init, "/") {
		return o, fmt.Errorf("bootfleet.init=%q: want an absolute path in the root image", o.Init)
	}
	return o, nil
}
