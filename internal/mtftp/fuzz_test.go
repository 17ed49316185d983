package mtftp

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseRRQ: any datagram is either refused with ErrNotRRQ or gives a
// path with no leading slash and no NUL; seeds in testdata/fuzz.
func FuzzParseRRQ(f *testing.F) {
	f.Add([]byte("\x00\x01profiles/p/kernel\x00octet\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path, err := parseRRQ(b)
		if err != nil {
			if !errors.Is(err, ErrNotRRQ) {
				t.Fatalf("error %v does not wrap ErrNotRRQ", err)
			}
			return
		}
		if path == "" || strings.HasPrefix(path, "/") || strings.ContainsRune(path, 0) {
			t.Fatalf("path %q from %q", path, b)
		}
	})
}

// TestParseRRQ: what iPXE sends, and what MTFTP refuses.
func TestParseRRQ(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"ipxe", "\x00\x01profiles/p/kernel\x00octet\x00", "profiles/p/kernel", true},
		{"leading slash", "\x00\x01/images/ab/vmlinuz\x00OCTET\x00", "images/ab/vmlinuz", true},
		{"unknown option ignored", "\x00\x01k\x00octet\x00tsize\x000\x00", "k", true},
		{"blksize", "\x00\x01k\x00octet\x00blksize\x001428\x00", "", false},
		{"netascii", "\x00\x01k\x00netascii\x00", "", false},
		{"WRQ", "\x00\x02k\x00octet\x00", "", false},
		{"ACK", "\x00\x04\x00\x01", "", false},
		{"only slashes", "\x00\x01//\x00octet\x00", "", false},
		{"short", "\x00", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRRQ([]byte(tt.in))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseRRQ(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}
