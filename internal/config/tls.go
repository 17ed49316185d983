package config

import (
	"net"
	"strings"
)

// TLS moves the API and the dashboard to an HTTPS listener, leaving the
// plain one to what boot firmware fetches (scripts, boot files, /files/,
// DoneURL, milestones) and /metrics. Set either Cert and Key, or
// SelfSigned.
type TLS struct {
	// Cert and Key are PEM files: the certificate chain and its private
	// key.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// SelfSigned makes an ECDSA certificate at first start, kept in the
	// data directory as tls-cert.pem (what clients pass as --ca) and
	// tls-key.pem, naming server_ip, the host name and loopback.
	SelfSigned bool `yaml:"self_signed"`
	// Listen is the HTTPS listener's TCP address. Default ":8443".
	Listen string `yaml:"listen"`
}

func (t *TLS) applyDefaults() {
	if t != nil && t.Listen == "" {
		t.Listen = ":8443"
	}
}

// validateTLS checks http.tls; bad is Validate's.
func (h HTTP) validateTLS(bad func(key, format string, args ...any)) {
	t := h.TLS
	if t == nil {
		return
	}
	switch {
	case t.SelfSigned && (t.Cert != "" || t.Key != ""):
		bad("http.tls.self_signed", "set either self_signed: true or cert and key, not both")
	case !t.SelfSigned && t.Cert == "" && t.Key == "":
		bad("http.tls", "set cert and key (PEM files), or self_signed: true; remove tls to serve the API over plain HTTP")
	case !t.SelfSigned && t.Cert == "":
		bad("http.tls.cert", "required with http.tls.key: the certificate chain, PEM")
	case !t.SelfSigned && t.Key == "":
		bad("http.tls.key", "required with http.tls.cert: the certificate's private key, PEM")
	}
	if _, _, err := net.SplitHostPort(t.Listen); err != nil {
		bad("http.tls.listen", "want host:port or :port, e.g. :8443, got %q", t.Listen)
	} else if samePort(t.Listen, h.Listen) {
		bad("http.tls.listen", "%s is also http.listen; the HTTPS listener needs its own port, e.g. :8443", t.Listen)
	}
}

// samePort reports whether two listen addresses would collide: the same
// port on the same or the wildcard host.
func samePort(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" || strings.EqualFold(h, "[::]") }
	return ha == hb || wild(ha) || wild(hb)
}
