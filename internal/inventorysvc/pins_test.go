package inventorysvc

import (
	"context"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
)

// TestConfigPins: a config that pins a version its image lacks is refused
// at start, naming the key and the versions there are; a pin of an image
// not imported yet, and pins that exist, are applied.
func TestConfigPins(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	defer st.Close()
	storetest.AddVersions(t, st, "lab", inventory.VersionProduction, inventory.VersionTest)
	const profiles = `
profiles:
  lab: {kernel: /k, root: {image: lab, channel: "%s"}}
  later: {kernel: /k, root: {image: notyet, channel: "3"}}
  bare: {kernel: /k}
`
	for _, tc := range []struct {
		name, profile, machines string
		want                    []string // nil: applied
	}{
		{"pins that exist", "2", `  - {mac: "52:54:00:00:00:01", profile: lab, root_channel: "1"}`, nil},
		{"profile pins a missing version", "5", "", []string{"profiles.lab.root.channel: image lab has no version 5", "1 (production), 2 (test)"}},
		{"machine pins a missing version", "test", `  - {mac: "52:54:00:00:00:01", profile: lab, root_channel: "4"}`,
			[]string{"machines[0].root_channel: image lab has no version 4"}},
		{"machine of a profile without a root image", "", `  - {mac: "52:54:00:00:00:01", profile: bare, root_channel: "1"}`,
			[]string{"machines[0].root_channel:", "no root image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(profiles, "%s", tc.profile, 1)
			if tc.machines != "" {
				y += "machines:\n" + tc.machines + "\n"
			}
			_, err := ApplyConfig(ctx, st, fullConfig(t, y))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("ApplyConfig: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ApplyConfig accepted the config; want it refused with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
