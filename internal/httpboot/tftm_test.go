package httpboot

import (
	"strings"
	"testing"
)

// TestScriptTFTM: with TFTM on, a profile's local kernel and initrd come
// by tftm:// first and by HTTP (every mirror) when that fails; files named
// by URL keep their URL alone.
func TestScriptTFTM(t *testing.T) {
	const self, b = "http://10.0.0.1:8080", "http://10.0.0.2:8080"
	tests := []struct {
		name  string
		mac   string
		tftm  bool
		bases []string
		want  []string // lines of the script, in order
	}{
		{"tftm then http", "52-54-00-aa-bb-cc", true, []string{self}, []string{
			"kernel tftm://10.0.0.1/profiles/linux/kernel initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || " +
				"kernel " + self + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || goto failed",
			"initrd --name initrd.img tftm://10.0.0.1/profiles/linux/initrd/0/initrd.img || " +
				"initrd --name initrd.img " + self + "/profiles/linux/initrd/0/initrd.img?mac=52-54-00-aa-bb-cc || goto failed",
		}},
		{"tftm then every mirror", "52-54-00-aa-bb-cc", true, []string{b, self}, []string{
			"kernel tftm://10.0.0.1/profiles/linux/kernel initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || " +
				"kernel " + b + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || " +
				"kernel " + self + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || goto failed",
		}},
		{"off", "52-54-00-aa-bb-cc", false, []string{self}, []string{
			"kernel " + self + "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=" + self + "/done/52-54-00-aa-bb-cc || goto failed",
		}},
		{"a kernel named by URL stays alone", "52-54-00-12-34-56", true, []string{self}, []string{
			"kernel http://mirror.example/vmlinuz rescue host=pc1 || goto failed",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *Config) { c.Mirrors, c.TFTM = &mirrors{bases: tt.bases}, tt.tftm })
			resp, body := e.do(t, "GET", "/ipxe/"+tt.mac, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			wantLinesInOrder(t, body, tt.want)
			if !tt.tftm && strings.Contains(body, "tftm://") {
				t.Fatalf("TFTM off, but the script names tftm://:\n%s", body)
			}
		})
	}
}

// wantLinesInOrder fails t unless script has the want lines, in order.
func wantLinesInOrder(t *testing.T, script string, want []string) {
	t.Helper()
	lines := strings.Split(script, "\n")
	at := 0
	for _, w := range want {
		for at < len(lines) && lines[at] != w {
			at++
		}
		if at == len(lines) {
			t.Fatalf("script lacks, in order,\n%s\ngot:\n%s", w, script)
		}
	}
}
