package identitysvc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestStoredFiles: a machine added through the API on a config profile
// renders the profile's config files and its own stored ones, sees the
// config profile's vars, and is checked against them before it is stored.
func TestStoredFiles(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	cfg, err := NewTemplates(map[string]Set{"lab": {Key: "profiles.lab", Vars: map[string]string{"room": "B12"},
		Files: []FileSpec{{Path: "/etc/motd", Mode: 0o644, Template: "{{.Name}} in {{.Vars.room}}\n"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProfile(ctx, inventory.Profile{Name: "lab", Kernel: "/k", Source: inventory.SourceConfig}); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: st, Files: cfg})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMachine(ctx, macA)
	if err != nil {
		t.Fatal(err)
	}
	m.Profile, m.Vars = "lab", map[string]string{"seat": "7"}
	m.RootFiles = []inventory.RootFile{{Path: "/etc/seat", Mode: 0o600, Owner: "kiosk", Template: "{{.Vars.seat}} {{.Vars.room}} {{.IP}}\n"}}
	if err := s.CheckMachine(ctx, m); err != nil {
		t.Fatalf("CheckMachine of a good machine: %v", err)
	}
	if _, err := st.UpdateMachine(ctx, m); err != nil {
		t.Fatal(err)
	}
	files, err := s.Files(ctx, macA)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || string(files[0].Content) != "pc1 in B12\n" || files[1].Path != "/etc/seat" ||
		string(files[1].Content) != "7 B12 10.0.0.11\n" || files[1].Mode != 0o600 || files[1].Owner != "kiosk" {
		t.Fatalf("rendered %+v", files)
	}

	for _, tt := range []struct{ tmpl, owner, want string }{
		{"{{.Vars.nope}}", "", "unknown variable .Vars.nope"},
		{"{{.Hostname}}", "", "unknown variable .Hostname"},
		{"{{range}}", "", "does not parse"},
		{"x", "a b", "owner"},
	} {
		bad := m
		bad.RootFiles = []inventory.RootFile{{Path: "/etc/x", Template: tt.tmpl, Owner: tt.owner}}
		err := s.CheckMachine(ctx, bad)
		if !errors.Is(err, inventory.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckMachine of %q owner %q: %v, want ErrInvalid saying %q", tt.tmpl, tt.owner, err, tt.want)
		}
	}
	// A profile that drops a var its machine's files use is refused.
	p := inventory.Profile{Name: "lab2", Kernel: "/k", Vars: map[string]string{"seat": "1"}}
	if _, err := st.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	m2, _ := st.GetMachine(ctx, macB)
	m2.Profile, m2.RootFiles = "lab2", []inventory.RootFile{{Path: "/etc/seat", Template: "{{.Vars.seat}}"}}
	if _, err := st.UpdateMachine(ctx, m2); err != nil {
		t.Fatal(err)
	}
	p.Vars = nil
	if err := s.CheckProfile(ctx, p); !errors.Is(err, inventory.ErrInvalid) || !strings.Contains(err.Error(), "unknown variable .Vars.seat") {
		t.Fatalf("CheckProfile dropping a var a machine uses: %v", err)
	}
}
