package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// TestCheckTemplates: the config's files: are checked as the server
// starts and as bootfleet check runs, template_file included.
func TestCheckTemplates(t *testing.T) {
	ex, err := config.Load("../../examples/bootfleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTemplates(ex); err != nil {
		t.Fatalf("examples/bootfleet.yaml: %v", err)
	}
	tmpl := filepath.Join(t.TempDir(), "motd.tmpl")
	os.WriteFile(tmpl, []byte("seat {{ .Vars.seat }}\n"), 0o644)
	base := "interface: br0\ndhcp: {mode: proxy}\nprofiles: {lab: {kernel: /k, files: [{path: /etc/motd, template_file: " + tmpl + "}]}}\n"
	for _, tt := range []struct{ name, extra, want string }{
		{"var nobody sets", "", "profiles.lab.files[0] (/etc/motd): unknown variable .Vars.seat"},
		{"missing template file", "", ""},
		{"machine sets it", "machines: [{mac: '52:54:00:00:00:01', profile: lab, vars: {seat: '7'}, files: [{path: /etc/seat, template: '{{ .Vars.seat }}'}]}]\n",
			"profiles.lab.files[0] (/etc/motd): unknown variable .Vars.seat"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := base + tt.extra
			if tt.name == "missing template file" {
				yaml = strings.Replace(base, tmpl, tmpl+".gone", 1)
				tt.want = "profiles.lab.files[0].template_file: open " + tmpl + ".gone"
			}
			c, err := config.Parse(strings.NewReader(yaml))
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckTemplates(c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckTemplates = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestIdentityKeyChecked: the first server of a fleet makes the identity
// key; a second one without the file, or with another key, refuses to
// serve identities and says which file to copy; with the copy it serves.
func TestIdentityKeyChecked(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	server := func() *config.Config {
		c, err := config.Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\ndata: " + t.TempDir() + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}
	if _, err := st.CreateMachine(ctx, inventory.Machine{MAC: mac, Name: "pc1"}); err != nil {
		t.Fatal(err)
	}
	view, err := machineview.New(machineview.Input{})
	if err != nil {
		t.Fatal(err)
	}
	first := server()
	if _, err := newIdentity(ctx, first, st, view, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(first.Identity.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("first server's identity key: %v, %v; want it made, mode 0600", fi, err)
	}

	second := server()
	ids, err := newIdentity(ctx, second, st, view, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second.Identity.KeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a server joining a fleet kept an identity key of its own (%v)", err)
	}
	if _, err := ids.Rekey(ctx, mac); !errors.Is(err, identity.ErrNoKey) || !strings.Contains(err.Error(), "copy that server's identity.key_file to "+second.Identity.KeyFile) {
		t.Fatalf("rekey on a server without the key: %v, want ErrNoKey saying what to copy where", err)
	}

	other := server()
	if _, err := identitysvc.LoadKey(other.Identity.KeyFile, true); err != nil {
		t.Fatal(err)
	}
	ids, err = newIdentity(ctx, other, st, view, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Rekey(ctx, mac); !errors.Is(err, identity.ErrNoKey) || !strings.Contains(err.Error(), other.Identity.KeyFile+" is not the fleet's identity key") {
		t.Fatalf("rekey on a server with another key: %v, want ErrNoKey naming its file", err)
	}

	b, err := os.ReadFile(first.Identity.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other.Identity.KeyFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if ids, err = newIdentity(ctx, other, st, view, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Rekey(ctx, mac); err != nil {
		t.Fatalf("rekey with the fleet's key copied: %v", err)
	}
}
