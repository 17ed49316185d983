package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names of the self-signed certificate and its key in the data
// directory. The certificate is what clients pass as --ca.
const (
	CertFile = "tls-cert.pem"
	KeyFile  = "tls-key.pem"
)

// Validity of a self-signed certificate. Long, because clients pin it
// (--ca) and a renewal means handing every admin a new file; it is made
// again when it nears its end (Renew) or no longer names the server.
const (
	Validity = 5 * 365 * 24 * time.Hour
	Renew    = 30 * 24 * time.Hour
)

// Load reads an admin's certificate chain and key (PEM).
func Load(certFile, keyFile string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return c, fmt.Errorf("load %s and %s: %w (want PEM files: the certificate chain, then its private key)", certFile, keyFile, err)
	}
	return c, nil
}

// SelfSigned returns the self-signed certificate kept in dir, making it
// first when there is none, when it does not name every one of ips and
// names, or when it expires within Renew. made says a new one was made:
// clients that pinned the old one must be given the new file.
func SelfSigned(dir string, ips []net.IP, names []string, now time.Time) (c tls.Certificate, made bool, err error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	c, err = tls.LoadX509KeyPair(certPath, keyPath)
	switch {
	case err == nil && covers(c.Leaf, ips, names) && now.Add(Renew).Before(c.Leaf.NotAfter):
		return c, false, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return c, false, fmt.Errorf("self-signed certificate %s: %w (delete %s and %s to make a new one at the next start)", certPath, err, certPath, keyPath)
	}
	certPEM, keyPEM, err := generate(ips, names, now)
	if err != nil {
		return c, false, err
	}
	// The key first, and each file whole or not at all: a crash between
	// the two leaves a pair that fails to load, which is made again.
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return c, false, err
	}
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return c, false, err
	}
	c, err = tls.X509KeyPair(certPEM, keyPEM)
	return c, true, err
}

// covers reports whether leaf names every one of ips and names.
func covers(leaf *x509.Certificate, ips []net.IP, names []string) bool {
	for _, ip := range ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	for _, n := range names {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	return true
}

func generate(ips []net.IP, names []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("make TLS serial: %w", err)
	}
	cn := "bootfleet"
	if len(names) > 0 {
		cn = names[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"bootfleet self-signed"}},
		NotBefore:    now.Add(-time.Hour), // a client whose clock is a little behind
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// A CA of itself, so that clients can pass the file as their CA.
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           ips,
		DNSNames:              names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("make TLS certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode TLS key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// writeFile replaces path with data through a temporary file and rename.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w (is the data directory writable?)", path, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	err = errors.Join(werr, tmp.Chmod(mode), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Fingerprint is the SHA-256 of a certificate's DER bytes, as colon-
// separated upper-case hex: what `openssl x509 -fingerprint -sha256` and
// browsers show, so an admin can compare them by eye.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	var b strings.Builder
	for i, x := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", x)
	}
	return b.String()
}

// Info describes a certificate for logs and bootfleet check.
type Info struct {
	Fingerprint string    // SHA-256, see Fingerprint
	NotAfter    time.Time // when it expires
	Names       []string  // its DNS names and IP addresses
}

// Describe reads the first certificate of a PEM file.
func Describe(path string) (Info, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Info{}, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return Info{}, fmt.Errorf("%s: want a PEM CERTIFICATE block first", path)
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return Info{}, fmt.Errorf("%s: %w", path, err)
	}
	return InfoOf(leaf), nil
}

// InfoOf describes leaf.
func InfoOf(leaf *x509.Certificate) Info {
	names := slices.Clone(leaf.DNSNames)
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	return Info{Fingerprint: Fingerprint(leaf.Raw), NotAfter: leaf.NotAfter, Names: names}
}
