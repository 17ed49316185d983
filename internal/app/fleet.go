package app

import (
	"log/slog"
	"net"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/diskless"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/membership"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// serverName is server.name, default the host name.
func serverName(c *config.Config) (string, error) {
	if c.Server.Name != "" {
		return c.Server.Name, nil
	}
	return membership.HostName()
}

// fleetRegistry registers this server in the store's servers table under
// its name, as the instance kept in dataDir, with its address, HTTP base
// and DHCP scopes (dhcpPeers, dhcp6Peers; none without DHCP), and reports the load the
// servers count anyway.
func fleetRegistry(name, dataDir string, store inventory.Servers, serverIP net.IP, baseURL string, dhcpScopes []string,
	tftpActive func() int, dl *diskless.Service, rec *telemetry.Recorder, log *slog.Logger) (*membership.Registry, error) {
	instance, err := membership.LoadInstance(dataDir)
	if err != nil {
		return nil, err
	}
	addrs := append([]string{serverIP.String(), baseURL}, dhcpScopes...)
	if port := dl.NBDPort(); port != 0 { // peers name it in the roots they fail over
		addrs = append(addrs, membership.NBDAddrEntry(net.JoinHostPort(serverIP.String(), strconv.Itoa(port))))
	}
	return membership.New(membership.Config{Store: store, Name: name, Instance: instance, Addrs: addrs,
		Logger: log, Counters: func() membership.Counters {
			return membership.Counters{TFTPTransfers: tftpActive(), NBDSessions: dl.Sessions(), BytesServed: rec.BytesServed()}
		}})
}
