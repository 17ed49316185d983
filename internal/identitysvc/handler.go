package identitysvc

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// Path is where agents fetch their identity from the HTTP boot server.
const Path = "/identity"

// AuthScheme is the Authorization scheme of an agent's request: the
// export name of its NBD root follows it.
const AuthScheme = "Bootfleet-Root"

// Authenticator says which machine presents a root export name from an
// address; *rootdisk.Manager implements it.
type Authenticator interface {
	Authenticate(export string, remote net.Addr) (net.HardwareAddr, error)
}

// Handler serves GET Path to agents: the identity of the machine whose
// root export the request presents (Authorization: Bootfleet-Root
// EXPORT), and ?ssh=1 for its host keys. Every refusal is logged with
// the address it came from; the export name never is.
func (s *Service) Handler(auth Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "want GET", http.StatusMethodNotAllowed)
			return
		}
		export, ok := strings.CutPrefix(r.Header.Get("Authorization"), AuthScheme+" ")
		if !ok || export == "" {
			s.log.Warn("identity request refused", "remote", r.RemoteAddr, "reason", "no Authorization: "+AuthScheme+" header")
			http.Error(w, "want Authorization: "+AuthScheme+" <the export name of the machine's root>", http.StatusUnauthorized)
			return
		}
		remote := remoteAddr(r)
		mac, err := auth.Authenticate(export, remote)
		if err != nil {
			s.log.Warn("identity request refused", "remote", r.RemoteAddr, "reason", err.Error())
			http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
			return
		}
		req := Request{MAC: mac, HostKeys: r.URL.Query().Get("ssh") == "1"}
		if tcp, ok := remote.(*net.TCPAddr); ok {
			req.Address = tcp.IP
		}
		id, err := s.Identity(r.Context(), req)
		if errors.Is(err, ErrNoKey) {
			s.log.Error("identity not served: no identity key", "mac", mac.String(), "remote", r.RemoteAddr, "err", err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if err != nil {
			s.log.Error("identity not served", "mac", mac.String(), "remote", r.RemoteAddr, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		b, err := identity.Encode(id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
		s.log.Info("identity served", "mac", mac.String(), "name", id.HostName, "remote", r.RemoteAddr,
			slog.Int("host_keys", len(id.HostKeys)), slog.Int("files", len(id.Files)))
	})
}

func remoteAddr(r *http.Request) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr)
	if err != nil {
		return nil
	}
	return a
}
