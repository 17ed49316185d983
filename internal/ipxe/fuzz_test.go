package ipxe

import (
	"strings"
	"testing"
)

// FuzzScript: whatever a profile and machine put in a boot, the script
// keeps its fixed shape (a line for the kernel, one per initrd, the retry
// loop) as long as no field holds a line break, and the initrd names are
// distinct and made of characters the kernel command line keeps. The
// seeds are in testdata/fuzz/FuzzScript.
func FuzzScript(f *testing.F) {
	f.Add("http://10.0.0.1:8080/vmlinuz", "http://10.0.0.1:8080/initrd.img", "", "quiet done=http://10.0.0.1:8080/done/x")
	f.Fuzz(func(t *testing.T, kernel, rd, name, cmdline string) {
		b := Boot{Kernel: kernel, Initrds: []Initrd{{URL: rd}, {URL: rd, Name: name}, {URL: rd + "?x"}}, Cmdline: cmdline}
		names := initrdNames(b.Initrds)
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] || sanitize(n) != n {
				t.Fatalf("initrd names %q for %+v: want distinct, non-empty, sanitized", names, b.Initrds)
			}
			seen[n] = true
		}
		s := Script(b)
		if strings.ContainsAny(kernel+rd+name+cmdline, "\r\n") {
			return
		}
		lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		if len(lines) != 8+len(b.Initrds) || !strings.HasPrefix(lines[2], "kernel ") || lines[len(lines)-1] != "goto start" {
			t.Fatalf("script for %+v lost its shape:\n%s", b, s)
		}
	})
}

// FuzzRenderCmdline: a profile's template either renders to one line or
// is refused with an error; never a panic, never a line break that would
// end the kernel line of the script.
func FuzzRenderCmdline(f *testing.F) {
	f.Add("console=ttyS0 done={{ .DoneURL }}", "lab-01")
	f.Fuzz(func(t *testing.T, tmpl, name string) {
		out, err := RenderCmdline(tmpl, Vars{MAC: "52:54:00:12:34:56", Name: name, Profile: "p",
			ServerIP: "10.0.0.1", HTTPBase: "http://10.0.0.1:8080", DoneURL: "http://10.0.0.1:8080/done/x"})
		if err == nil && strings.ContainsAny(out, "\r\n") {
			t.Fatalf("RenderCmdline(%q) = %q: a line break got through", tmpl, out)
		}
	})
}
