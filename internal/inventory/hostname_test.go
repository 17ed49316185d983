package inventory_test

import (
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func TestCheckHostName(t *testing.T) {
	for _, tt := range []struct {
		name, why string // why: a part of the reason, "" for valid
	}{
		{"pc1", ""},
		{"PC-01", ""},
		{"pc1.lab2.example.org", ""},
		{"3com", ""},
		{"a", ""},
		{strings.Repeat("a", 63), ""},
		{strings.Repeat("a.", 126) + "b", ""}, // 253
		{"", "empty"},
		{strings.Repeat("a", 64), "at most 63"},
		{strings.Repeat("a.", 126) + "bc", "at most 253"},
		{"-pc", "hyphen"},
		{"pc-", "hyphen"},
		{"pc1.-lab", "hyphen"},
		{"pc_1", `'_' at position 3`},
		{"pc 1", `' ' at position 3`},
		{"pc1.lab_2", `'_' at position 8`},
		{"pé", "not a letter"},
		{"pc1..lab", "label 2 is empty"},
		{".pc1", "label 1 is empty"},
		{"pc1.", "ends with a dot"},
		{"1234", "all digits"},
		{"10.0.0.1", "all digits"},
	} {
		got := inventory.CheckHostName(tt.name)
		if tt.why == "" && got != "" {
			t.Errorf("CheckHostName(%q) = %q, want valid", tt.name, got)
		}
		if tt.why != "" && !strings.Contains(got, tt.why) {
			t.Errorf("CheckHostName(%q) = %q, want a reason with %q", tt.name, got, tt.why)
		}
	}
}

func TestMachineNameRefusedWithReason(t *testing.T) {
	m := inventory.Machine{MAC: []byte{0x52, 0x54, 0, 0, 0, 1}, Name: "lab_pc1"}
	err := m.Validate()
	if err == nil || !strings.Contains(err.Error(), "RFC 1123") || !strings.Contains(err.Error(), `'_' at position 4`) {
		t.Fatalf("Validate() = %v, want a refusal naming RFC 1123 and the bad character", err)
	}
}
