package config

import (
	"strings"
	"testing"
)

func TestServerName(t *testing.T) {
	tests := []struct{ yaml, name, err string }{
		{"", "", ""},
		{"server: {name: boot-a.lab}", "boot-a.lab", ""},
		{"server: {name: 'boot a'}", "", `server.name: want a name of letters, digits, . _ - (at most 253, as a host name), got "boot a"`},
		{"server: {name: -a}", "", "server.name: want a name"},
		{"server: {name: " + strings.Repeat("a", 254) + "}", "", "server.name: want a name"},
		{"server: {id: 3}", "", "field id not found"},
	}
	for _, tt := range tests {
		c, err := Parse(strings.NewReader(minimal + tt.yaml))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: got %v, want an error containing %q", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil || c.Server.Name != tt.name {
			t.Errorf("%q: got %v, name %q; want %q", tt.yaml, err, c.Server.Name, tt.name)
		}
	}
}
