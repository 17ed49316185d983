package identitysvc

import (
	"net"
	"strings"
	"testing"
)

func TestTemplatesRender(t *testing.T) {
	profiles := map[string]Set{
		"lab": {Key: "profiles.lab", Vars: map[string]string{"kiosk": "https://intranet/", "room": "lab1"},
			Files: []FileSpec{
				{Path: "/etc/hosts", Mode: 0o644, Template: "127.0.1.1 {{.Name}}\n{{.IP}} {{.Name}}.{{.Vars.room}}\n"},
				{Path: "/etc/kiosk-url", Mode: 0o644, Owner: "kiosk:kiosk", Template: "{{.Vars.kiosk}}"},
				{Path: "/etc/motd", Mode: 0o644, Template: "profile {{.Profile}}, {{.MAC}}\n"},
			}},
	}
	machines := map[string]MachineSet{
		macA.String(): {Profile: "lab", Set: Set{Key: "machines[0]", Vars: map[string]string{"room": "lab2", "seat": "7"},
			Files: []FileSpec{{Path: "/etc/motd", Mode: 0o600, Template: "seat {{.Vars.seat}} in {{.Vars.room}}\n"}}}},
	}
	tm, err := NewTemplates(profiles, machines)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	files, err := tm.Render(Machine{MAC: macA, Name: "pc1", Profile: "lab", IP: net.IPv4(10, 0, 0, 11)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got[f.Path] = string(f.Content)
	}
	want := map[string]string{
		// The machine's vars win over the profile's ...
		"/etc/hosts":     "127.0.1.1 pc1\n10.0.0.11 pc1.lab2\n",
		"/etc/kiosk-url": "https://intranet/",
		// ... and its own file replaces the profile's of the same path.
		"/etc/motd": "seat 7 in lab2\n",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
	if len(files) != 3 || files[0].Path != "/etc/hosts" || files[1].Owner != "kiosk:kiosk" || files[2].Mode != 0o600 {
		t.Errorf("files %+v, want three in path order with their modes and owners", files)
	}
	// Another machine of the profile gets the profile's files and vars.
	files, err = tm.Render(Machine{MAC: macB, Name: "pc2", Profile: "lab"})
	if err != nil || string(files[2].Content) != "profile lab, 52:54:00:00:00:0b\n" || !strings.Contains(string(files[0].Content), " pc2.lab1") {
		t.Fatalf("pc2's files: %+v, %v", files, err)
	}
}

// TestTemplatesRefusedWhenConfigured: every mistake is found before any
// machine boots, and the error names the config key and the fix.
func TestTemplatesRefusedWhenConfigured(t *testing.T) {
	for _, tt := range []struct {
		name    string
		profile []FileSpec
		machine []FileSpec
		want    string
	}{
		{"does not parse", []FileSpec{{Path: "/a", Template: "{{.Name"}}, nil, "profiles.lab.files[0] (/a): template does not parse"},
		{"unknown field", []FileSpec{{Path: "/a", Template: "{{.Hostname}}"}}, nil, "unknown variable .Hostname; a template sees .Name, .MAC, .IP, .Profile, .Vars"},
		{"unknown var", []FileSpec{{Path: "/a", Template: "{{if .Vars.seat}}x{{end}}"}}, nil, "unknown variable .Vars.seat; set it under vars:"},
		{"machine var in a profile file", []FileSpec{{Path: "/a", Template: "{{range .Vars}}{{end}}{{.Vars.seat}}"}}, nil, "profiles.lab.files[0] (/a): unknown variable .Vars.seat"},
		{"unknown var in a machine file", nil, []FileSpec{{Path: "/b", Template: "{{with .Vars.desk}}{{.}}{{end}}"}}, "machines[0].files[0] (/b): unknown variable .Vars.desk"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTemplates(
				map[string]Set{"lab": {Key: "profiles.lab", Vars: map[string]string{"room": "1"}, Files: tt.profile}},
				map[string]MachineSet{macA.String(): {Profile: "lab", Set: Set{Key: "machines[0]", Vars: map[string]string{"seat": "7"}, Files: tt.machine}}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewTemplates = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
