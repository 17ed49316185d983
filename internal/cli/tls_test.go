package cli

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/certs"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
)

// TestCA: against an HTTPS server the CLI trusts only what --ca or
// BOOTFLEET_CA names, and says what to do when the certificate is not
// trusted.
func TestCA(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := api.New(api.Config{Store: st, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644)
	_, _, err = certs.SelfSigned(dir, nil, []string{"other"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "x.txt")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	t.Setenv("BOOTFLEET_SERVER", "")
	t.Setenv("BOOTFLEET_TOKEN", testToken)
	t.Setenv("BOOTFLEET_CA", "")

	tests := []struct {
		name, env string
		args      []string
		want      string
	}{
		{"--ca", "", []string{"--server", srv.URL, "--ca", ca}, "NAME"},
		{"BOOTFLEET_CA", ca, []string{"--server", srv.URL}, "NAME"},
		{"no CA", "", []string{"--server", srv.URL}, "error: the server's certificate is not trusted"},
		{"another CA", "", []string{"--server", srv.URL, "--ca", filepath.Join(dir, certs.CertFile)}, "pass --ca FILE or set BOOTFLEET_CA"},
		{"not PEM", "", []string{"--server", srv.URL, "--ca", notPEM}, "no PEM certificate"},
		{"CA for http", "", []string{"--server", "http://127.0.0.1:1", "--ca", ca}, "is not https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BOOTFLEET_CA", tt.env)
			out := run(t, append([]string{"profile", "list", "--data", dir}, tt.args...)...)
			if !strings.Contains(out, tt.want) {
				t.Fatalf("printed %q, want %q", out, tt.want)
			}
		})
	}
}

func TestCheckShowsFingerprint(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "bootfleet.yaml")
	os.WriteFile(cfg, []byte("dhcp: {mode: off}\nserver_ip: 10.0.0.1\ndata: "+data+"\nhttp: {tls: {self_signed: true}}\n"), 0o644)
	if out := run(t, "check", "--config", cfg); !strings.Contains(out, "made at first start") || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("check before the first start: %q", out)
	}
	c, _, err := certs.SelfSigned(data, nil, []string{"boot1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if out := run(t, "check", "--config", cfg); !strings.Contains(out, "sha256 "+certs.Fingerprint(c.Leaf.Raw)) || !strings.Contains(out, "boot1") {
		t.Fatalf("check after the first start: %q, want the fingerprint %s", out, certs.Fingerprint(c.Leaf.Raw))
	}
}
