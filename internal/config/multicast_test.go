package config

import (
	"strings"
	"testing"
)

func TestMulticastDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Multicast
	if m.Mode != "auto" || m.Rate != "50%" || m.Port != 10810 || m.TTL != 1 || m.Group != "" {
		t.Fatalf("defaults %+v, want mode auto, rate 50%%, port 10810, ttl 1, group 239.0.0.0/8", m)
	}
	if m.MTFTP != "auto" || m.MTFTPPort != 1759 || m.MTFTPGroup != "239.255.1.1:3001" || !m.MTFTPOn() {
		t.Fatalf("mtftp defaults %+v, want auto on port 1759, group 239.255.1.1:3001", m)
	}
	if s, err := m.Space(); err != nil || s.Prefix().String() != "239.0.0.0/8" {
		t.Fatalf("default space %v, %v", s.Prefix(), err)
	}
}

func TestMulticastRefuses(t *testing.T) {
	for _, tc := range []struct{ yaml, says string }{
		{"multicast: {mode: on}", "multicast.mode"},
		{"multicast: {group: 224.1.0.0/16}", "multicast.group"},
		{"multicast: {group: 10.0.0.0/8, allow_global_groups: true}", "multicast.group"},
		{"multicast: {rate: 500k}", "multicast.rate"},
		{"multicast: {rate: 0%}", "multicast.rate"},
		{"multicast: {rate: fast}", "multicast.rate"},
		{"multicast: {port: 70000}", "multicast.port"},
		{"multicast: {ttl: 300}", "multicast.ttl"},
		{"multicast: {mtftp: on}", "multicast.mtftp"},
		{"multicast: {mtftp_port: 0x10000}", "multicast.mtftp_port"},
		{"multicast: {mtftp_port: 10810}", "multicast.mtftp_port"},
		{"multicast: {mtftp_group: 224.0.1.1:3001}", "multicast.mtftp_group"},
		{"multicast: {mtftp_group: 239.255.1.1}", "multicast.mtftp_group"},
		{"multicast: {mtftp_group: 10.0.0.1:3001, allow_global_groups: true}", "multicast.mtftp_group"},
	} {
		_, err := Parse(strings.NewReader(minimal + tc.yaml + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want an error naming %s", tc.yaml, err, tc.says)
		}
	}
	if _, err := Parse(strings.NewReader(minimal + "multicast: {mtftp_group: 224.0.1.1:3001, allow_global_groups: true}\n")); err != nil {
		t.Errorf("explicit global mtftp group: %v", err)
	}
	// MTFTP rides on the multicast root: off with it.
	if c, err := Parse(strings.NewReader(minimal + "multicast: {mode: off}\n")); err != nil || c.Multicast.MTFTPOn() {
		t.Errorf("multicast.mode off: mtftp on %v, %v; want off", c.Multicast.MTFTPOn(), err)
	}
	// A block outside 239/8 asked for explicitly is taken.
	if _, err := Parse(strings.NewReader(minimal + "multicast: {group: 232.1.0.0/16, allow_global_groups: true}\n")); err != nil {
		t.Errorf("explicit global group: %v", err)
	}
}

func TestMulticastBytesPerSecond(t *testing.T) {
	for _, tc := range []struct {
		rate     string
		link     int64
		want     int64
		refusing bool
	}{
		{"50%", 1_000_000_000, 62_500_000, false},
		{"50%", 0, 62_500_000, false}, // no speed reported: a share of 1 Gbit/s
		{"400M", 1_000_000_000, 50_000_000, false},
		{"2G", 1_000_000_000, 0, true},
		{"2G", 0, 250_000_000, false}, // unknown link: nothing to refuse against
		{"100%", 10_000_000_000, 1_250_000_000, false},
	} {
		got, err := Multicast{Rate: tc.rate}.BytesPerSecond(tc.link)
		if tc.refusing {
			if err == nil || !strings.Contains(err.Error(), "link speed") {
				t.Errorf("%s on %d: got %d, %v; want refused for the link speed", tc.rate, tc.link, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s on %d: got %d, %v; want %d", tc.rate, tc.link, got, err, tc.want)
		}
	}
}
