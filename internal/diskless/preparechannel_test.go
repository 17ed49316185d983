package diskless

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// versionedImages is one image, "debian", at production version 1, with
// the versions given.
type versionedImages struct {
	fakeImages
	versions []inventory.ImageVersion
}

func (v versionedImages) ListImageVersions(context.Context, string) ([]inventory.ImageVersion, error) {
	return v.versions, nil
}

// TestPrepareKernelsMachineChannel: a machine pinning a version other
// than its profile's gets that version's kernel built ahead too.
func TestPrepareKernelsMachineChannel(t *testing.T) {
	images := versionedImages{fakeImages: fakeImages{}}
	d, data, blobs := newKernelService(t, &images)
	var shas []string
	for i := range 2 {
		res, err := blobs.ImportContext(t.Context(), strings.NewReader(strings.Repeat(fmt.Sprintf("root%d", i), 1024)))
		if err != nil {
			t.Fatal(err)
		}
		shas = append(shas, res.SHA256)
		images.versions = append(images.versions, inventory.ImageVersion{Image: "debian", Version: i + 1, SHA256: res.SHA256, State: inventory.VersionTest})
	}
	images.versions[0].State = inventory.VersionProduction
	images.fakeImages["debian"] = inventory.Image{Name: "debian", SHA256: shas[0], Version: 1}
	mac, _ := net.ParseMAC("52:54:00:00:00:01")
	d.PrepareKernels(machineview.Input{
		Profiles: map[string]inventory.Profile{"lab": {Root: inventory.Root{Image: "debian", Kernel: inventory.RootKernelImage}}},
		Machines: []machineview.Machine{{MAC: mac, Profile: "lab", Channel: "2"}},
	})
	for i, sha := range shas {
		built := filepath.Join(data, "kernels", sha, "vmlinuz")
		testutil.Eventually(t, 5*time.Second, fmt.Sprintf("the kernel of version %d", i+1), func() error {
			_, err := os.Stat(built)
			return err
		})
	}
}
