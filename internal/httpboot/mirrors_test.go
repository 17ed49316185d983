package httpboot

import (
	"net"
	"testing"
)

// mirrors answers every machine with the same bases and remembers what
// it was asked.
type mirrors struct {
	bases []string
	sha   string
	bytes int64
}

func (m *mirrors) BaseURLs(_ net.HardwareAddr, sha string, bytes int64) []string {
	m.sha, m.bytes = sha, bytes
	return m.bases
}

func TestScriptSpreadsFiles(t *testing.T) {
	const self, b, c = "http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080"
	tests := []struct {
		name  string
		mac   string
		bases []string
		want  []string // lines of the script, in order
	}{
		{"another server first then this one then a third", "52-54-00-aa-bb-cc", []string{b, self, c}, []string{
			"kernel " + b + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || " +
				"kernel " + self + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || " +
				"kernel " + c + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || goto failed",
			"initrd --name initrd.img " + b + "/profiles/linux/initrd/0/initrd.img?mac=52-54-00-aa-bb-cc || " +
				"initrd --name initrd.img " + self + "/profiles/linux/initrd/0/initrd.img?mac=52-54-00-aa-bb-cc || " +
				"initrd --name initrd.img " + c + "/profiles/linux/initrd/0/initrd.img?mac=52-54-00-aa-bb-cc || goto failed",
		}},
		{"this server alone has no fallbacks", "52-54-00-aa-bb-cc", []string{self}, []string{
			"kernel " + self + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || goto failed",
		}},
		{"a kernel named by URL stays where it is", "52-54-00-12-34-56", []string{b, self}, []string{
			"kernel http://mirror.example/vmlinuz rescue host=pc1 || goto failed",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &mirrors{bases: tt.bases}
			e := newEnvWith(t, func(c *Config) { c.Mirrors = m })
			resp, body := e.do(t, "GET", "/ipxe/"+tt.mac, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			wantLinesInOrder(t, body, tt.want)
			if m.sha != "" {
				t.Errorf("profile files asked for content %q, want none", m.sha)
			}
		})
	}
	t.Run("the profile's local files are counted", func(t *testing.T) {
		m := &mirrors{bases: []string{self}}
		e := newEnvWith(t, func(c *Config) { c.Mirrors = m })
		e.do(t, "GET", "/ipxe/52-54-00-aa-bb-cc", nil)
		if want := int64(len(e.kernel) + len("initrd")); m.bytes != want {
			t.Errorf("bytes counted = %d, want kernel plus initrd, %d", m.bytes, want)
		}
	})
}
