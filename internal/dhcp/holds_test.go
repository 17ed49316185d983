package dhcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// TestDeclineHoldSurvivesRestart: an address declined before a restart
// is still held after it, with HoldFile; without, the restarted server
// offers it again (which is what the file prevents).
func TestDeclineHoldSurvivesRestart(t *testing.T) {
	tests := []struct {
		name      string
		holdFile  bool
		offer     string // to the next machine, 5 minutes after the decline
		offerLate string // 11 minutes after, when the hold has run out
	}{
		{"with a hold file", true, "10.0.0.101", "10.0.0.100"},
		{"in memory only", false, "10.0.0.100", "10.0.0.100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.holdFile {
				path = filepath.Join(t.TempDir(), "dhcp-declined.json")
			}
			withHolds := func(c *Config) { c.HoldFile = path }
			ts := newTestServer(t, ModeFull, withHolds)
			ts.dora(t, macB, fwLinux) // gets 10.0.0.100
			ts.send(t, msg(t, dhcpv4.MessageTypeDecline, macB, fwLinux, requested(ip4("10.0.0.100")), serverID(serverIP)), false)

			for _, step := range []struct {
				after time.Duration
				want  string
			}{{5 * time.Minute, tt.offer}, {11 * time.Minute, tt.offerLate}} {
				again := newTestServer(t, ModeFull, withHolds) // the restart, on the same files
				again.clock.t = t0.Add(step.after)
				r, why := again.send(t, discover(t, macA, fwLinux), false)
				check(t, discover(t, macA, fwLinux), r, why, want{typ: dhcpv4.MessageTypeOffer, yiaddr: step.want, dest: bcast, lease: true})
			}
		})
	}
}

func TestHoldCodec(t *testing.T) {
	until := time.Date(2026, 3, 1, 8, 10, 0, 0, time.UTC)
	holds := map[uint32]time.Time{ip2u(ip4("10.0.0.101")): until, ip2u(ip4("10.0.0.100")): until.Add(time.Minute)}
	b, err := encodeHolds(holds)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(string(b), "10.0.0.100"), strings.Index(string(b), "10.0.0.101"); i < 0 || j < i {
		t.Fatalf("holds not ordered by address:\n%s", b)
	}
	tests := []struct {
		name string
		in   string
		n    int
		err  string
	}{
		{"round trip", string(b), 2, ""},
		{"empty", `{"version": 1, "holds": []}`, 0, ""},
		{"not JSON", `{`, 0, "want a JSON hold file"},
		{"other version", `{"version": 2}`, 0, "want version 1, got 2"},
		{"bad address", `{"version": 1, "holds": [{"ip": "fe80::1", "until": "2026-03-01T08:00:00Z"}]}`, 0, `holds[0]: want an IPv4 address and a time, got "fe80::1"`},
		{"no time", `{"version": 1, "holds": [{"ip": "10.0.0.1"}]}`, 0, "holds[0]: want an IPv4 address and a time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeHolds([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil || len(got) != tt.n {
				t.Fatalf("got %v, %v; want %d holds", got, err, tt.n)
			}
			for u, when := range got {
				if !when.Equal(holds[u]) {
					t.Errorf("hold of %v until %v, want %v", u2ip(u), when, holds[u])
				}
			}
		})
	}
}

// TestHoldFileDamaged: a damaged file stops the start with a message
// that names the file and the fix.
func TestHoldFileDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dhcp-declined.json")
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Mode: ModeFull, Interface: "test0", ServerIP: serverIP, RangeStart: ip4("10.0.0.100"),
		RangeEnd: ip4("10.0.0.102"), LeaseStore: NewMemStore(), HoldFile: path}
	cfg.Netmask = ip4("255.255.255.0").DefaultMask()
	_, err := New(cfg)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete the file") {
		t.Fatalf("New with a damaged hold file: %v, want an error naming it and the fix", err)
	}
}
