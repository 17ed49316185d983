package api

import (
	"net/http"
	"time"
)

// Server is one bootfleet server of the fleet, as GET /servers shows it.
type Server struct {
	Name string `json:"name"`
	// Status is live, stale (no heartbeat for 30 s) or stopped, at the
	// time of the answer by the answering server's clock.
	Status        string     `json:"status"`
	Addrs         []string   `json:"addrs"`
	Version       string     `json:"version"`
	Started       time.Time  `json:"started"`
	Heartbeat     time.Time  `json:"heartbeat"`
	Stopped       *time.Time `json:"stopped,omitempty"`
	TFTPTransfers int        `json:"tftp_transfers"`
	NBDSessions   int        `json:"nbd_sessions"`
	BytesPerSec   int64      `json:"bytes_per_sec"`
}

// ServerList is the answer of GET /servers.
type ServerList struct {
	Servers []Server `json:"servers"`
}

func (s *server) listServers(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.cfg.Store.ListServers(r.Context())
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	out := ServerList{Servers: make([]Server, 0, len(ss))}
	for _, si := range ss {
		v := Server{Name: si.Name, Status: si.Status(now), Addrs: si.Addrs, Version: si.Version,
			Started: si.Started, Heartbeat: si.Heartbeat, TFTPTransfers: si.Load.TFTPTransfers,
			NBDSessions: si.Load.NBDSessions, BytesPerSec: si.Load.BytesPerSec}
		if !si.Stopped.IsZero() {
			v.Stopped = &si.Stopped
		}
		out.Servers = append(out.Servers, v)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// removeServer forgets a retired server: until then the fleet keeps
// showing it stale and counting the images it held.
func (s *server) removeServer(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := s.cfg.Store.RemoveServer(r.Context(), name, s.cfg.Now()); err != nil {
		return err
	}
	s.log.Info("server removed from the fleet", "server", name, "by", callerOf(r).name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
