package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/certs"
	"github.com/bootfleet/bootfleet/internal/config"
)

// TestSplitManagement: with http.tls the API and dashboard are served over
// HTTPS with the self-signed certificate, and the plain listener keeps
// only firmware's paths and /metrics.
func TestSplitManagement(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+" "+r.URL.Path) })
	}
	c := &config.Config{Data: t.TempDir()}
	c.HTTP.TLS = &config.TLS{SelfSigned: true, Listen: "127.0.0.1:0"}
	serverIP := net.IPv4(127, 0, 0, 1)
	plain, runs, err := splitManagement(c, serverIP, named("front"), named("boot"), named("metrics"), slog.New(slog.DiscardHandler))
	if err != nil || len(runs) != 1 {
		t.Fatalf("splitManagement: %d runs, %v; want the HTTPS listener", len(runs), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runs[0](ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// The HTTPS listener: found through the log line's URL would be
	// roundabout; the certificate names 127.0.0.1 and the listener is the
	// only TCP socket splitManagement opened, so ask the plain handler
	// where it sends the dashboard.
	psrv := httptest.NewServer(plain)
	defer psrv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(psrv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	httpsBase := strings.TrimSuffix(resp.Header.Get("Location"), "/")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(httpsBase, "https://127.0.0.1:") {
		t.Fatalf("plain GET /: %d to %q, want a redirect to the HTTPS dashboard", resp.StatusCode, httpsBase)
	}

	plainTests := []struct{ path, want string }{
		{"/ipxe/52-54-00-00-00-02", "boot /ipxe/52-54-00-00-00-02"},
		{"/files/ipxe.efi", "boot /files/ipxe.efi"},
		{"/metrics", "metrics /metrics"},
		{"/api/v1/machines", `"error":"this server serves the API over HTTPS only`},
		{"/api/v1", `"error"`},
	}
	for _, tt := range plainTests {
		t.Run("plain "+tt.path, func(t *testing.T) {
			b, status := get(t, http.DefaultClient, psrv.URL+tt.path)
			if !strings.Contains(b, tt.want) {
				t.Fatalf("answered %d %q, want %q", status, b, tt.want)
			}
			if strings.HasPrefix(tt.path, "/api/") && (status != http.StatusMisdirectedRequest || !strings.Contains(b, httpsBase)) {
				t.Fatalf("answered %d %q, want 421 naming %s", status, b, httpsBase)
			}
		})
	}

	pemBytes, err := os.ReadFile(filepath.Join(c.Data, certs.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if b, _ := get(t, trusting, httpsBase+"/api/v1/machines"); b != "front /api/v1/machines" {
		t.Fatalf("HTTPS with the certificate as CA: %q, want the front handler", b)
	}
	if _, err := http.Get(httpsBase + "/api/v1/machines"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("HTTPS without the CA: %v, want a certificate error", err)
	}
}

func get(t *testing.T, c *http.Client, url string) (string, int) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}
