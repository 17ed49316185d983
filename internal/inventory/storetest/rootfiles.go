package storetest

import (
	"reflect"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// testRootFiles: files: and vars: of profiles and machines survive a
// write, a reopen, a status change and an update that drops them, and
// bad ones are refused with the field at fault.
func testRootFiles(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	p := inventory.Profile{Name: "lab", Kernel: "/srv/k", Vars: map[string]string{"room": "B12", "url": "http://kiosk"},
		RootFiles: []inventory.RootFile{
			{Path: "/etc/motd", Template: "{{.Name}} in {{.Vars.room}}\n"},
			{Path: "/etc/lab.conf", Mode: 0o600, Owner: "lab:users", Template: "url={{.Vars.url}}\n"},
		}}
	got := must[inventory.Profile](t)(s.CreateProfile(c, p))
	want := p
	want.Source = inventory.SourceAPI
	want.RootFiles = []inventory.RootFile{
		{Path: "/etc/motd", Mode: 0o644, Template: "{{.Name}} in {{.Vars.room}}\n"},
		{Path: "/etc/lab.conf", Mode: 0o600, Owner: "lab:users", Template: "url={{.Vars.url}}\n"},
	}
	if !reflect.DeepEqual(got.RootFiles, want.RootFiles) || !reflect.DeepEqual(got.Vars, want.Vars) {
		t.Fatalf("CreateProfile files %#v vars %v, want %#v %v", got.RootFiles, got.Vars, want.RootFiles, want.Vars)
	}
	want = got
	m := inventory.Machine{MAC: mac("52:54:00:00:00:21"), Name: "pc21", Profile: "lab", Vars: map[string]string{"room": "B13"},
		RootFiles: []inventory.RootFile{{Path: "/etc/seat", Mode: 0o640, Template: "seat {{.Vars.room}}\n"}}}
	gm := must[inventory.Machine](t)(s.CreateMachine(c, m))
	if !reflect.DeepEqual(gm.RootFiles, m.RootFiles) || !reflect.DeepEqual(gm.Vars, m.Vars) {
		t.Fatalf("CreateMachine files %#v vars %v, want %#v %v", gm.RootFiles, gm.Vars, m.RootFiles, m.Vars)
	}
	s = b.Reopen(t, s)
	if got := must[inventory.Profile](t)(s.GetProfile(c, "lab")); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen profile = %+v, want %+v", got, want)
	}
	ms := must[[]inventory.Machine](t)(s.ListMachines(c, inventory.MachineFilter{Profile: "lab"}))
	if len(ms) != 1 || !reflect.DeepEqual(ms[0].RootFiles, m.RootFiles) || !reflect.DeepEqual(ms[0].Vars, m.Vars) {
		t.Fatalf("ListMachines = %+v, want one machine with files %+v vars %v", ms, m.RootFiles, m.Vars)
	}

	// An update without them drops them: PUT replaces the whole record.
	bare := want
	bare.RootFiles, bare.Vars = nil, nil
	if got := must[inventory.Profile](t)(s.UpdateProfile(c, bare)); got.RootFiles != nil || got.Vars != nil {
		t.Fatalf("UpdateProfile without files kept files %+v vars %v", got.RootFiles, got.Vars)
	}
	gm.RootFiles, gm.Vars = nil, nil
	if got := must[inventory.Machine](t)(s.UpdateMachine(c, gm)); got.RootFiles != nil || got.Vars != nil {
		t.Fatalf("UpdateMachine without files kept files %+v vars %v", got.RootFiles, got.Vars)
	}

	bad := []struct {
		name  string
		files []inventory.RootFile
		vars  map[string]string
	}{
		{"relative path", []inventory.RootFile{{Path: "etc/motd", Template: "x"}}, nil},
		{"unclean path", []inventory.RootFile{{Path: "/etc/../motd", Template: "x"}}, nil},
		{"twice", []inventory.RootFile{{Path: "/etc/a", Template: "x"}, {Path: "/etc/a", Template: "y"}}, nil},
		{"mode", []inventory.RootFile{{Path: "/etc/a", Mode: 0o10000, Template: "x"}}, nil},
		{"var name", nil, map[string]string{"1st": "x"}},
	}
	for _, tt := range bad {
		field := "files"
		if tt.vars != nil {
			field = "vars"
		}
		_, err := s.CreateProfile(c, inventory.Profile{Name: "bad", Kernel: "/k", RootFiles: tt.files, Vars: tt.vars})
		wantErr(t, err, inventory.ErrInvalid, field)
		_, err = s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:22"), RootFiles: tt.files, Vars: tt.vars})
		wantErr(t, err, inventory.ErrInvalid, field)
	}
}
