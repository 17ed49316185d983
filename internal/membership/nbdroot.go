package membership

import (
	"net"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// nbdScheme marks the address a server registers for its NBD listener.
const nbdScheme = "nbd://"

// NBDAddrEntry is the entry a server registers among its Addrs for its NBD
// listener at hostport (HOST:PORT): nbd://HOST:PORT. Peers read it to name
// the server as a failover target of machines whose root it can serve.
func NBDAddrEntry(hostport string) string { return nbdScheme + hostport }

// NBDAddr is the NBD listener a server registered, HOST:PORT, or "" when
// it registered none (NBD off, or a version that did not register it).
func NBDAddr(s inventory.ServerInfo) string {
	for _, a := range s.Addrs {
		if hp, ok := strings.CutPrefix(a, nbdScheme); ok {
			if _, _, err := net.SplitHostPort(hp); err == nil {
				return hp
			}
		}
	}
	return ""
}

// Order lists the live servers that may serve content sha to machine mac,
// best first. It is called on every script render and must read memory,
// not the store.
type Order func(mac net.HardwareAddr, sha string) []inventory.ServerInfo
