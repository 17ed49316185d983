package agent

import (
	"strings"
	"testing"
)

// FuzzParseCmdline: any kernel command line either parses into options
// the agent can act on (a root it can dial, an absolute init, timeouts in
// range) or returns an error; never a panic. The seeds are in
// testdata/fuzz/FuzzParseCmdline.
func FuzzParseCmdline(f *testing.F) {
	f.Add("console=ttyS0 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-12-34-56-abc done=http://10.0.0.1:8080/done/x")
	f.Fuzz(func(t *testing.T, cmdline string) {
		o, err := ParseCmdline(cmdline)
		if err != nil {
			return
		}
		if o.Root.Export == "" || o.Root.Host == "" || o.Root.Port < 1 || o.Root.Port > 65535 {
			t.Fatalf("ParseCmdline(%q) accepted root %+v", cmdline, o.Root)
		}
		if !strings.HasPrefix(o.Init, "/") {
			t.Fatalf("ParseCmdline(%q) accepted init %q", cmdline, o.Init)
		}
		if o.IOTimeout <= 0 || o.DeadConn < 0 {
			t.Fatalf("ParseCmdline(%q): timeouts %v, %v", cmdline, o.IOTimeout, o.DeadConn)
		}
		if o.Milestones != "" && !strings.HasPrefix(o.Milestones, "http://") {
			t.Fatalf("ParseCmdline(%q) accepted milestones %q", cmdline, o.Milestones)
		}
		// The target is what the server wrote: it must read back the same.
		back, err := ParseTarget("nbd:" + o.Root.Addr() + ":" + o.Root.Export)
		if err != nil || back != o.Root {
			t.Fatalf("root %+v does not survive its own form: %+v, %v", o.Root, back, err)
		}
	})
}
