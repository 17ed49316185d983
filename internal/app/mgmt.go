package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/certs"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/httpboot"
)

// splitManagement serves front (API, dashboard, everything) on an HTTPS
// listener when http.tls is set, and returns what the plain listener
// serves then: only firmware's paths and /metrics. Without http.tls the
// plain listener serves front and there is nothing more to run.
//
// /metrics stays on the plain listener, where scrapers are configured
// today: it needs no token and holds no secret, so TLS alone would guard
// nothing and only break every scrape config. It is on HTTPS too.
func splitManagement(c *config.Config, serverIP net.IP, front, boot, metrics http.Handler, log *slog.Logger) (plain http.Handler, runs []func(context.Context) error, err error) {
	if c.HTTP.TLS == nil {
		return front, nil, nil
	}
	cert, err := managementCert(c, serverIP, log)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", c.HTTP.TLS.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("http.tls.listen: listen on %s: %w (is the port taken? set http.tls.listen)", c.HTTP.TLS.Listen, err)
	}
	httpsBase := "https://" + net.JoinHostPort(serverIP.String(), portOf(ln.Addr()))
	tln := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	log.Info("management over https", "url", httpsBase, "sha256", certs.Fingerprint(cert.Leaf.Raw))
	run := func(ctx context.Context) error { return serveHTTP(ctx, tln, front, log) }
	return firmwareHandler(boot, metrics, httpsBase), []func(context.Context) error{run}, nil
}

// managementCert loads the admin's certificate, or makes or reuses the
// self-signed one, and logs its fingerprint for admins to compare.
func managementCert(c *config.Config, serverIP net.IP, log *slog.Logger) (tls.Certificate, error) {
	t := c.HTTP.TLS
	if !t.SelfSigned {
		cert, err := certs.Load(t.Cert, t.Key)
		if err != nil {
			return cert, fmt.Errorf("http.tls.cert, http.tls.key: %w", err)
		}
		return cert, nil
	}
	ips := []net.IP{serverIP, net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append([]string{h}, names...)
	}
	cert, made, err := certs.SelfSigned(c.Data, ips, names, time.Now())
	if err != nil {
		return cert, fmt.Errorf("http.tls.self_signed: %w", err)
	}
	info := certs.InfoOf(cert.Leaf)
	if made {
		log.Warn("made a self-signed certificate; give clients this file as --ca", "file", c.Data+"/"+certs.CertFile,
			"sha256", info.Fingerprint, "names", info.Names, "expires", info.NotAfter)
	}
	return cert, nil
}

// firmwareHandler is the plain listener's handler with http.tls set: boot
// paths and /metrics. The API answers with where it went, and the
// dashboard redirects there, so neither is reachable without TLS.
func firmwareHandler(boot, metrics http.Handler, httpsBase string) http.Handler {
	moved := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(api.ErrorBody{Error: "this server serves the API over HTTPS only (http.tls): use " + httpsBase +
			" (bootfleet --server " + httpsBase + " --ca FILE, the server's certificate)"})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMisdirectedRequest)
		w.Write(append(b, '\n'))
	})
	return routes(metrics, moved, http.RedirectHandler(httpsBase+"/", http.StatusFound), boot)
}

// routes is the one map of what the HTTP listeners serve: /metrics, the
// API under /api/v1/, the dashboard at / and /ui/, and the boot paths for
// everything else.
func routes(metrics, apiHandler, dash, boot http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.Handle(api.Prefix, apiHandler)
	mux.Handle(api.Prefix+"/", apiHandler)
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /ui/", dash)
	mux.Handle("/", boot)
	return httpboot.JoinSlashes(mux)
}
