package inventory

import (
	"context"
	"regexp"
	"time"
)

// StaleAfter is how old a server's last heartbeat may be before the fleet
// calls it stale: three missed heartbeats of the default 10 s.
const StaleAfter = 30 * time.Second

// The states a server is shown in.
const (
	ServerLive    = "live"    // heartbeat within StaleAfter
	ServerStale   = "stale"   // no heartbeat for StaleAfter: dead, hung or cut off from the store
	ServerStopped = "stopped" // shut down cleanly
)

// ServerInfo is one bootfleet server of the fleet, as it registered itself
// in the store it shares with the others.
type ServerInfo struct {
	Name      string    // unique in the fleet; config server.name, default the host name
	Instance  string    // which bootfleet holds the name: an id kept in its data directory
	Addrs     []string  // where machines and peers reach it, e.g. 10.0.0.1 or http://10.0.0.1:8080
	Version   string    // buildinfo.Version of its binary
	Started   time.Time // when it registered; the store keeps microseconds
	Heartbeat time.Time // its last heartbeat, by its own clock
	Stopped   time.Time // zero while it runs; set by a clean shutdown
	Load      ServerLoad
}

// ServerLoad is what a server reports with each heartbeat.
type ServerLoad struct {
	TFTPTransfers int   // TFTP transfers in progress
	NBDSessions   int   // NBD sessions open
	BytesPerSec   int64 // bytes served (TFTP, HTTP, NBD) per second since the last heartbeat
}

// Status is ServerLive, ServerStale or ServerStopped at now. A server's
// heartbeat is written with its own clock and read with another's, so
// the servers' clocks must agree to well within StaleAfter (NTP does).
func (s ServerInfo) Status(now time.Time) string {
	switch {
	case !s.Stopped.IsZero():
		return ServerStopped
	case now.Sub(s.Heartbeat) > StaleAfter:
		return ServerStale
	}
	return ServerLive
}

// MayReplace reports whether s may register over held, the row its name
// has: a stopped or stale server's row is free, and a live one only to
// the same Instance, a server restarting before its row went stale. An
// empty Instance is nobody's, so it never takes a live row.
func (s ServerInfo) MayReplace(held ServerInfo) bool {
	return held.Status(s.Heartbeat) != ServerLive || (s.Instance != "" && s.Instance == held.Instance)
}

// NameTaken is the error for s registering under the name of held, a
// live server that s may not replace.
func (s ServerInfo) NameTaken(held ServerInfo) error {
	return Conflict("name", "server name %q is taken by a live server (addresses %v, started %s, last heartbeat %s ago): two servers share the name; set server.name to a name of this server's own",
		s.Name, held.Addrs, held.Started.UTC().Format(time.RFC3339), s.Heartbeat.Sub(held.Heartbeat).Round(time.Second))
}

// Servers is the table of the fleet's servers. Each server writes its own
// row only, so servers sharing a store never contend for a row.
type Servers interface {
	// RegisterServer inserts s, or replaces the row of s.Name when
	// s.MayReplace it: a server that restarts registers again, with its
	// new start time, and is no longer stopped. ErrConflict when the name
	// is held by another live server (s.NameTaken). Heartbeat defaults to
	// Started and is the clock the held row is judged by.
	RegisterServer(ctx context.Context, s ServerInfo) error
	// HeartbeatServer records the heartbeat at `at` and the load of the
	// server name that registered at started. ErrNotFound when no server
	// has the name (the row was removed: register again); ErrConflict
	// when the row has another start time, that is, another server
	// registered under the same name since.
	HeartbeatServer(ctx context.Context, name string, started, at time.Time, load ServerLoad) error
	// StopServer marks the server name that registered at started as shut
	// down at `at`; the same errors as HeartbeatServer.
	StopServer(ctx context.Context, name string, started, at time.Time) error
	// ListServers returns every registered server ordered by name.
	ListServers(ctx context.Context) ([]ServerInfo, error)
	// RemoveServer deletes the row of a server that is not live at now
	// (stopped, or stale: retired or dead for good) and the record of the
	// images it held, so that the fleet stops counting it. ErrNotFound when
	// no server has the name; ErrConflict when it is live, because a
	// running server would register again at its next heartbeat.
	RemoveServer(ctx context.Context, name string, now time.Time) error
}

// serverNameRE allows a host name, fully qualified or not.
var serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// ValidServerName reports whether name can name a server: letters, digits,
// '.', '_' and '-', starting with a letter or digit, at most 253.
func ValidServerName(name string) bool { return serverNameRE.MatchString(name) }

// Validate checks s, cuts its times to the microseconds the store keeps
// and fills Heartbeat from Started.
func (s *ServerInfo) Validate() error {
	if !ValidServerName(s.Name) {
		return invalid("name", "want a server name (letters, digits, . _ -, at most 253; set server.name), got %q", s.Name)
	}
	if s.Started.IsZero() {
		return invalid("started", "want the server's start time, got none")
	}
	if s.Load.TFTPTransfers < 0 || s.Load.NBDSessions < 0 || s.Load.BytesPerSec < 0 {
		return invalid("load", "want counts of zero or more, got %+v", s.Load)
	}
	s.Started = s.Started.Truncate(time.Microsecond)
	if s.Heartbeat.IsZero() {
		s.Heartbeat = s.Started
	}
	if s.Addrs == nil {
		s.Addrs = []string{}
	}
	return nil
}
