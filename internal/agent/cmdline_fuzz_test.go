package agent

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// FuzzParseCmdline: any kernel command line either parses into options
// the agent can act on (a root it can dial, an absolute init, timeouts in
// range) or returns an error; never a panic. The seeds are in
// testdata/fuzz/FuzzParseCmdline.
func FuzzParseCmdline(f *testing.F) {
	f.Add("console=ttyS0 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-12-34-56-abc done=http://10.0.0.1:8080/done/x")
	f.Add("bootfleet.root=nbd:10.0.0.1:10809,[fd00::2]:10809,c:1:b-x,y:z bootfleet.milestones=http://10.0.0.1:8080/milestone/m")
	f.Fuzz(func(t *testing.T, cmdline string) {
		o, err := ParseCmdline(cmdline)
		if err != nil {
			return
		}
		servers := o.Root.Servers()
		if o.Root.Export == "" || len(servers) > rootarg.MaxServers {
			t.Fatalf("ParseCmdline(%q) accepted root %+v", cmdline, o.Root)
		}
		for _, s := range servers {
			if s.Host == "" || strings.ContainsAny(s.Host, ",[]") || s.Port < 1 || s.Port > 65535 {
				t.Fatalf("ParseCmdline(%q) accepted server %+v", cmdline, s)
			}
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
		back, err := rootarg.Parse(o.Root.Arg())
		if err != nil || !reflect.DeepEqual(back, o.Root) {
			t.Fatalf("root %+v does not survive its own form: %+v, %v", o.Root, back, err)
		}
	})
}
