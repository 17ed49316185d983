package certs

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSelfSigned(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	ip := []net.IP{net.IPv4(10, 0, 0, 1)}
	names := []string{"boot1"}
	tests := []struct {
		name     string
		ips      []net.IP
		names    []string
		now      time.Time
		wantMade bool
	}{
		{"kept", ip, names, t0.Add(24 * time.Hour), false},
		{"new server_ip", []net.IP{net.IPv4(10, 0, 0, 2)}, names, t0, true},
		{"new hostname", ip, []string{"boot2"}, t0, true},
		{"near its end", ip, names, t0.Add(Validity - Renew/2), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, made, err := SelfSigned(dir, ip, names, t0)
			if err != nil || !made {
				t.Fatalf("first start: made %v, %v; want a new certificate", made, err)
			}
			c, made, err := SelfSigned(dir, tt.ips, tt.names, tt.now)
			if err != nil || made != tt.wantMade {
				t.Fatalf("second start: made %v (%v), want %v", made, err, tt.wantMade)
			}
			same := string(c.Leaf.Raw) == string(first.Leaf.Raw)
			if same == tt.wantMade {
				t.Fatalf("second start returned the first certificate: %v, want %v", same, !tt.wantMade)
			}
			if err := c.Leaf.VerifyHostname(tt.ips[0].String()); err != nil {
				t.Errorf("certificate does not name %s: %v", tt.ips[0], err)
			}
			if err := c.Leaf.VerifyHostname(tt.names[0]); err != nil {
				t.Errorf("certificate does not name %s: %v", tt.names[0], err)
			}
			if _, ok := c.Leaf.PublicKey.(*ecdsa.PublicKey); !ok {
				t.Errorf("key is %T, want ECDSA", c.Leaf.PublicKey)
			}
			fi, err := os.Stat(filepath.Join(dir, KeyFile))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file mode %v (%v), want 0600", fi.Mode(), err)
			}
		})
	}
}

// TestSelfSignedVerifies: the certificate file is a CA a client can pin.
func TestSelfSignedVerifies(t *testing.T) {
	dir := t.TempDir()
	c, _, err := SelfSigned(dir, []net.IP{net.IPv4(10, 0, 0, 1)}, []string{"boot1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("tls-cert.pem holds no PEM certificate")
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.1"}); err != nil {
		t.Fatalf("the certificate does not verify against its own file: %v", err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.0.0.9"}); err == nil {
		t.Fatal("verified for an address it does not name")
	}
}

func TestSelfSignedRefusesBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, CertFile), []byte("not PEM"), 0o644)
	os.WriteFile(filepath.Join(dir, KeyFile), []byte("not PEM"), 0o600)
	if _, _, err := SelfSigned(dir, nil, []string{"x"}, time.Now()); err == nil || !strings.Contains(err.Error(), "delete") {
		t.Fatalf("got %v, want an error saying to delete the files", err)
	}
}

func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	c, _, err := SelfSigned(dir, nil, []string{"x"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c.Leaf.Raw)
	want := strings.ToUpper(hex.EncodeToString(sum[:]))
	got := Fingerprint(c.Leaf.Raw)
	if strings.ReplaceAll(got, ":", "") != want || len(got) != 95 {
		t.Fatalf("Fingerprint = %s, want %s in colon-separated pairs", got, want)
	}
	info, err := Describe(filepath.Join(dir, CertFile))
	if err != nil || info.Fingerprint != got || info.Names[0] != "x" {
		t.Fatalf("Describe = %+v, %v", info, err)
	}
	// openssl, when present, agrees (it is on every machine that runs make test).
	if out, err := exec.Command("openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", filepath.Join(dir, CertFile)).Output(); err == nil {
		if !strings.Contains(string(out), got) {
			t.Fatalf("openssl says %q, Fingerprint %s", out, got)
		}
	}
}
