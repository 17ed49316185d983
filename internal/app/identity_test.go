package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/config"
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
