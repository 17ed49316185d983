package api

import (
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
)

// TestMachineRootChannel: a machine's own root channel goes in by POST,
// PATCH and PUT and comes back in every read; empty follows the profile
// again; a bad one is refused naming the field and the channels there
// are.
func TestMachineRootChannel(t *testing.T) {
	e := newEnv(t, false)
	storetest.AddVersions(t, e.store, "deb", inventory.VersionProduction, inventory.VersionTest)
	e.mustDo(t, "POST", "/profiles", `{"name":"lab","kernel":"/vmlinuz","root_image":"deb","root_channel":"test"}`, 201, nil)
	var m Machine
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:aa:00:01","name":"pc1","profile":"lab","root_channel":"2"}`, 201, &m)
	if m.RootChannel != "2" {
		t.Fatalf("created %+v, want root_channel 2", m)
	}
	e.mustDo(t, "PATCH", "/machines/pc1", `{"root_channel":"production"}`, 200, &m)
	e.mustDo(t, "GET", "/machines/pc1", "", 200, &m)
	if m.RootChannel != "production" || m.Profile != "lab" {
		t.Fatalf("after PATCH: %+v, want root_channel production on profile lab", m)
	}
	var eb ErrorBody
	e.mustDo(t, "PATCH", "/machines/pc1", `{"root_channel":"v2"}`, 400, &eb)
	if eb.Field != "root_channel" || !strings.Contains(eb.Error, "want production, test or a version number") {
		t.Fatalf("bad channel refused with %+v, want the field and the channels there are", eb)
	}
	e.mustDo(t, "PATCH", "/machines/pc1", `{"root_channel":""}`, 200, &m)
	if m.RootChannel != "" {
		t.Fatalf("after PATCH to empty: %+v, want it to follow its profile", m)
	}
	e.mustDo(t, "PUT", "/machines/pc1", `{"name":"pc1","profile":"lab","root_channel":"test"}`, 200, &m)
	var ml MachineList
	e.mustDo(t, "GET", "/machines", "", 200, &ml)
	if len(ml.Machines) == 0 || ml.Machines[0].Name != "pc1" || ml.Machines[0].RootChannel != "test" {
		t.Fatalf("listed %+v, want pc1 with root_channel test", ml)
	}
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:aa:00:02","root_channel":"0"}`, 400, &eb)
	if eb.Field != "root_channel" {
		t.Fatalf("version 0 refused with %+v, want field root_channel", eb)
	}
}
