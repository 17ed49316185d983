package rootdisk

import (
	"net"
	"strings"
	"testing"
)

func TestLogLabelHidesTheSecret(t *testing.T) {
	mac, _ := net.ParseMAC("52:54:00:12:34:56")
	secret := "3f9c0123456789abcdef0123456789ab"
	tests := []struct{ name, in, want string }{
		{"machine export", ExportName(mac, secret), "m-52-54-00-12-34-56-3f9c…"},
		{"image name", "debian", "(not a machine export, 6 bytes)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LogLabel(tt.in)
			if got != tt.want || strings.Contains(got, secret[4:]) {
				t.Fatalf("LogLabel(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
