package inventory_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func hw(s string) net.HardwareAddr {
	m, _ := net.ParseMAC(s)
	return m
}

func TestModelValidation(t *testing.T) {
	tests := []struct {
		name  string
		m     inventory.Machine
		field string
	}{
		{"ok", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Name: "pc-1", Labels: map[string]string{"a.b/c": "x y"}}, ""},
		{"name too long", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Name: strings.Repeat("a", 64)}, "name"},
		{"name leading hyphen", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Name: "-pc"}, "name"},
		{"label value with newline", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Labels: map[string]string{"a": "x\ny"}}, "labels"},
		{"profile with slash", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Profile: "a/b"}, "profile"},
		{"source", inventory.Machine{MAC: hw("52:54:00:00:00:01"), Source: "dhcp"}, "source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.m.Validate()
			var ie *inventory.Error
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.As(err, &ie) || ie.Field != tt.field {
				t.Fatalf("got %v, want an error about %s", err, tt.field)
			}
		})
	}
}
