package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/identitysvc"
)

// TestFileFlags sets files and vars with profile add/set and machine
// add/set, sees them rendered by machine render, and sees a bad template
// refused with the reason.
func TestFileFlags(t *testing.T) {
	srv, _ := newServer(t, withIdentities(identitysvc.Config{}, nil))
	conn := connArgs(t, srv)
	cli := func(args ...string) string { return run(t, append(args, conn...)...) }

	motd := filepath.Join(t.TempDir(), "motd.tmpl")
	if err := os.WriteFile(motd, []byte("{{.Name}} in room {{.Vars.room}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := cli("profile", "add", "lab", "--kernel", "/k", "--var", "room=B12", "--file", "/etc/motd:0600:root:adm=@"+motd)
	if !strings.Contains(out, "added profile lab") || !strings.Contains(out, "vars:") || !strings.Contains(out, "file /etc/motd:") || !strings.Contains(out, "0600 root:adm") {
		t.Fatalf("profile add:\n%s", out)
	}
	out = cli("machine", "add", "--mac", "52:54:00:00:00:01", "--name", "pc1", "--profile", "lab", "--ip", "10.0.0.21",
		"--var", "seat=7", "--file", "/etc/seat=seat {{.Vars.seat}} at {{.IP}}\n")
	if !strings.Contains(out, "added machine") || !strings.Contains(out, "seat=7") {
		t.Fatalf("machine add:\n%s", out)
	}
	want := "==> /etc/motd (mode 0600, owner root:adm) <==\npc1 in room B12\n\n==> /etc/seat (mode 0644, owner root) <==\nseat 7 at 10.0.0.21\n"
	if out := cli("machine", "render", "pc1"); out != want {
		t.Fatalf("machine render:\n%s\nwant:\n%s", out, want)
	}

	// The machine's vars win; profile set edits the profile's in place.
	cli("machine", "set", "pc1", "--var", "room=B13")
	if out := cli("machine", "render", "pc1", "/etc/motd"); out != "==> /etc/motd (mode 0600, owner root:adm) <==\npc1 in room B13\n" {
		t.Fatalf("render after machine set --var:\n%s", out)
	}
	cli("machine", "set", "pc1", "--unvar", "room")
	if out := cli("profile", "set", "lab", "--var", "room=C1"); !strings.Contains(out, "updated profile lab") || !strings.Contains(out, "room=C1") {
		t.Fatalf("profile set:\n%s", out)
	}
	if out := cli("machine", "render", "pc1", "/etc/motd"); !strings.Contains(out, "pc1 in room C1") {
		t.Fatalf("render after profile set --var:\n%s", out)
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"machine", "set", "pc1", "--file", "/etc/x={{.Vars.nope}}"}, "unknown variable .Vars.nope"},
		{[]string{"profile", "set", "lab", "--file", "/etc/y={{if}}"}, "does not parse"},
		{[]string{"profile", "set", "lab", "--unvar", "room"}, "unknown variable .Vars.room"}, // /etc/motd uses it
		{[]string{"profile", "set", "lab", "--file", "/etc/z"}, "want PATH[:MODE[:OWNER]]=@TEMPLATE_FILE"},
		{[]string{"profile", "set", "lab", "--file", "/etc/z=@/nonexistent/t"}, "read the template"},
		{[]string{"profile", "set", "lab", "--unfile", "/etc/none"}, "no file at that path"},
		{[]string{"profile", "set", "lab"}, "nothing to change"},
	}
	for _, tt := range bad {
		if out := cli(tt.args...); !strings.Contains(out, "error: ") || !strings.Contains(out, tt.want) {
			t.Errorf("%v: %q, want an error saying %q", tt.args, out, tt.want)
		}
	}
	cli("machine", "set", "pc1", "--unfile", "/etc/seat")
	if out := cli("machine", "render", "pc1"); strings.Contains(out, "/etc/seat") || !strings.Contains(out, "/etc/motd") {
		t.Fatalf("render after --unfile:\n%s", out)
	}
}

// withIdentities gives the API an identity service of cfg on the
// server's store, and sets *ids to it when ids is not nil.
func withIdentities(cfg identitysvc.Config, ids **identitysvc.Service) func(*api.Config) {
	return func(c *api.Config) {
		cfg.Store = c.Store
		svc, _ := identitysvc.New(cfg)
		if ids != nil {
			*ids = svc
		}
		c.Identities = svc
	}
}
