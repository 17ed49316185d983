package cli

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestIdentityCommands: known-hosts, machine rekey and machine render
// against the real API and identity service.
func TestIdentityCommands(t *testing.T) {
	key, err := identitysvc.LoadKey(filepath.Join(t.TempDir(), "identity.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := identitysvc.NewTemplates(map[string]identitysvc.Set{"lab": {Key: "profiles.lab",
		Files: []identitysvc.FileSpec{{Path: "/etc/motd", Mode: 0o644, Template: "welcome to {{.Name}}\n"},
			{Path: "/etc/hosts", Mode: 0o644, Template: "{{.IP}} {{.Name}}\n"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids *identitysvc.Service
	srv, st := newServer(t, withIdentities(identitysvc.Config{Sealer: key, Files: tmpl}, &ids))
	conn := connArgs(t, srv)
	ctx := context.Background()
	if _, err := st.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "/k"}); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: mac, Name: "pc1", Profile: "lab", IP: net.IPv4(10, 0, 0, 21)}); err != nil {
		t.Fatal(err)
	}
	if out := run(t, append([]string{"known-hosts"}, conn...)...); out != "" {
		t.Fatalf("known-hosts before any boot: %q, want nothing", out)
	}
	if _, err := ids.Identity(ctx, identitysvc.Request{MAC: mac, HostKeys: true}); err != nil { // its first boot
		t.Fatal(err)
	}
	out := run(t, append([]string{"known-hosts", "--profile", "lab"}, conn...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "pc1,10.0.0.21 ssh-ed25519 AAAA") || !strings.HasPrefix(lines[2], "pc1,10.0.0.21 ssh-rsa AAAA") {
		t.Fatalf("known-hosts:\n%s", out)
	}
	out = run(t, append([]string{"machine", "rekey", "pc1"}, conn...)...)
	if !strings.HasPrefix(out, "rekeyed machine 52:54:00:00:00:01") || strings.Count(out, "SHA256:") != 3 {
		t.Fatalf("machine rekey:\n%s", out)
	}
	if again := run(t, append([]string{"known-hosts", "--machine", "pc1"}, conn...)...); again == "" || again == out {
		t.Fatalf("known-hosts after rekey: %q", again)
	}
	out = run(t, append([]string{"machine", "render", "pc1"}, conn...)...)
	if out != "==> /etc/hosts (mode 0644, owner root) <==\n10.0.0.21 pc1\n\n==> /etc/motd (mode 0644, owner root) <==\nwelcome to pc1\n" {
		t.Fatalf("machine render:\n%s", out)
	}
	if out := run(t, append([]string{"machine", "render", "pc1", "/etc/fstab"}, conn...)...); !strings.Contains(out, "error: machine pc1 gets no file /etc/fstab") {
		t.Fatalf("render of a file it does not get: %q", out)
	}
}
