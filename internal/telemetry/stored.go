package telemetry

import (
	"encoding/json"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// encodeBoot is what the inventory keeps of b: the raw record as JSON,
// without Summary and Phases, which derive computes again at each read
// (so a fix to derive also fixes old records).
func encodeBoot(b Boot) (inventory.BootRecord, error) {
	mac, err := inventory.ParseMAC(b.MAC)
	if err != nil {
		return inventory.BootRecord{}, fmt.Errorf("boot %s: %w", b.ID, err)
	}
	b.Summary, b.Phases = Summary{}, nil
	raw, err := json.Marshal(b)
	if err != nil {
		return inventory.BootRecord{}, fmt.Errorf("boot %s: encode: %w", b.ID, err)
	}
	return inventory.BootRecord{ID: b.ID, MAC: mac, Start: b.Start, State: b.State, Record: raw}, nil
}

// decodeBoot reads a stored record back. The indexed columns must agree
// with the JSON, or the row was edited by hand.
func decodeBoot(rec inventory.BootRecord) (Boot, error) {
	var b Boot
	if err := json.Unmarshal(rec.Record, &b); err != nil {
		return Boot{}, fmt.Errorf("stored boot %s: want the JSON of a boot record: %w", rec.ID, err)
	}
	if b.ID != rec.ID || b.MAC != rec.MAC.String() {
		return Boot{}, fmt.Errorf("stored boot %s: its record says boot %q of %q, want boot %q of %s", rec.ID, b.ID, b.MAC, rec.ID, rec.MAC)
	}
	b.Summary, b.Phases = Summary{}, nil
	if b.Path == nil {
		b.Path = []string{}
	}
	if b.DHCP == nil {
		b.DHCP = []DHCPExchange{}
	}
	if b.Transfers == nil {
		b.Transfers = []Transfer{}
	}
	if b.Milestones == nil {
		b.Milestones = []Milestone{}
	}
	return b, nil
}
