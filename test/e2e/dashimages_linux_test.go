package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardImages: the dashboard's images view, in headless
// chromium, shows an imported image with its content hash and size, the
// server holding it, and the machines whose profiles root them on it
// (eph1 and pers1 of nbdRootConfig), and its version with its state and
// the profiles that boot it. No VM boots.
func TestDashboardImages(t *testing.T) {
	e := needEnv(t)
	dir := artifactDir(t)
	lan := newLAN(t)
	image := filepath.Join(t.TempDir(), "root.ext4")
	makeRootImage(t, image)
	serveRootImage(t, e, lan, dir, nbdRootConfig, map[string]string{"NBDInitrd": e.initrd}, serverIP, image)
	web := proxyInto(t, lan, serverIP+":8080")
	token := apiToken(t, dir)
	var imgs struct {
		Images []struct {
			Name, SHA256 string
			Servers      []struct{ Name string }
		}
	}
	getJSON(t, web+"/api/v1/images", token, &imgs)
	if len(imgs.Images) != 1 || len(imgs.Images[0].Servers) != 1 {
		t.Fatalf("GET /api/v1/images = %+v, want %s held by this server", imgs, nbdImageName)
	}
	img := imgs.Images[0]

	ctx := startBrowser(t, 90*time.Second)
	row := fmt.Sprintf(`#images tbody tr[data-image=%q]`, nbdImageName)
	err := openDashboard(ctx, web, token, chromedp.WaitVisible(row))
	screenshot(ctx, dir, "dashboard-images.png")
	if err != nil {
		t.Fatalf("dashboard at %s: no row %s: %v", web, row, err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(row))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{nbdImageName, img.SHA256[:12], "64.0 MiB", img.Servers[0].Name, "eph1", "pers1"} {
		if !strings.Contains(text, want) {
			t.Errorf("images row %q lacks %q", text, want)
		}
	}
	// Its one version: production and current, booted next by both
	// profiles, read by no machine now.
	vrow := fmt.Sprintf(`#versions tbody tr[data-image=%q][data-version="1"]`, nbdImageName)
	if text, err = chromedp.Run(ctx, chromedp.Text(vrow)); err != nil {
		t.Fatalf("no versions row %s: %v", vrow, err)
	}
	for _, want := range []string{"production, current", "profile eph, profile pers"} {
		if !strings.Contains(text, want) {
			t.Errorf("versions row %q lacks %q", text, want)
		}
	}
}
