package config

import (
	"strings"
	"testing"
)

func TestTLS(t *testing.T) {
	tests := []struct {
		name, http string
		key        string // the key the error names; "" means valid
		listen     string // the HTTPS listener when valid
	}{
		{"none", `{listen: ":8080"}`, "", ""},
		{"self-signed", `{tls: {self_signed: true}}`, "", ":8443"},
		{"files", `{tls: {cert: /etc/c.pem, key: /etc/k.pem, listen: "10.0.0.1:443"}}`, "", "10.0.0.1:443"},
		{"empty", `{tls: {}}`, "http.tls:", ""},
		{"both", `{tls: {self_signed: true, cert: /c, key: /k}}`, "http.tls.self_signed", ""},
		{"cert only", `{tls: {cert: /c}}`, "http.tls.key", ""},
		{"key only", `{tls: {key: /k}}`, "http.tls.cert", ""},
		{"same port", `{listen: ":8080", tls: {self_signed: true, listen: "0.0.0.0:8080"}}`, "http.tls.listen", ""},
		{"bad listen", `{tls: {self_signed: true, listen: "8443"}}`, "http.tls.listen", ""},
		{"unknown key", `{tls: {self_sign: true}}`, "self_sign", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(minimal + "http: " + tt.http + "\n"))
			if tt.key == "" {
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				if c.HTTP.TLS != nil {
					got = c.HTTP.TLS.Listen
				}
				if got != tt.listen {
					t.Fatalf("http.tls.listen = %q, want %q", got, tt.listen)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("got %v, want an error naming %s", err, tt.key)
			}
		})
	}
}
