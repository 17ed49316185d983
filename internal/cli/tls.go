package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/internal/certs"
	"github.com/bootfleet/bootfleet/internal/config"
)

// transport verifies an https:// server against ca (a PEM file) when one
// is given, and only against it: a pinned self-signed certificate should
// not also accept whatever the system's CAs sign for that address.
func transport(u *url.URL, ca string) (http.RoundTripper, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if ca == "" {
		return tr, nil
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("--ca (or BOOTFLEET_CA) is set but the server %s is not https://; use https://HOST:8443 (http.tls.listen) or drop --ca", u)
	}
	b, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it; want the server's certificate or its CA, PEM", ca)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

// untrusted reports whether err is the server's certificate failing
// verification, which the admin fixes with --ca, not by restarting
// anything.
func untrusted(err error) bool {
	var (
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		cv *tls.CertificateVerificationError
	)
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &cv)
}

// describeTLS prints the management certificate for bootfleet check: its
// fingerprint is what an admin compares with the one a client was given.
func describeTLS(w io.Writer, c *config.Config) error {
	t := c.HTTP.TLS
	if t == nil {
		return nil
	}
	path := t.Cert
	if t.SelfSigned {
		path = filepath.Join(c.Data, certs.CertFile)
	}
	info, err := certs.Describe(path)
	switch {
	case t.SelfSigned && errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(w, "http.tls: self-signed, on %s; the certificate is made at first start in %s\n", t.Listen, path)
		return nil
	case err != nil && t.SelfSigned:
		return fmt.Errorf("http.tls.self_signed: %w (delete it to make a new one at the next start)", err)
	case err != nil:
		return fmt.Errorf("http.tls.cert: %w", err)
	}
	if !t.SelfSigned {
		if _, err := certs.Load(t.Cert, t.Key); err != nil {
			return fmt.Errorf("http.tls.cert, http.tls.key: %w", err)
		}
	}
	kind := "certificate"
	if t.SelfSigned {
		kind = "self-signed certificate"
	}
	fmt.Fprintf(w, "http.tls: on %s, %s %s\n  sha256 %s\n  names %s, expires %s\n", t.Listen, kind, path,
		info.Fingerprint, strings.Join(info.Names, ", "), info.NotAfter.UTC().Format("2006-01-02"))
	return nil
}
