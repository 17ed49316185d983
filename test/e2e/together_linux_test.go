package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestFourTogether powers on four real VMs at once, as a small storm: OVMF
// and SeaBIOS mixed, one of them diskless over NBD. Every one must call its
// DoneURL; then `bootfleet boots` and the dashboard's storm view must show
// all four boots complete.
func TestFourTogether(t *testing.T) {
	e := needEnv(t)
	n := needNBD(t, e)
	dir := artifactDir(t)
	lan := newLAN(t)
	for i := range 4 {
		lan.addTap(t, fmt.Sprintf("tap%d", i))
	}
	startCapture(t, lan, dir)
	server, cli := startNBDRootServer(t, e, n, lan, dir)

	// Four TCG VMs share two CPUs: allow each four single boots' time.
	wait := 4 * bootTimeout(t)
	vms := []struct {
		v        vm
		diskless bool
	}{
		{vm{fw: uefi, mac: "52:54:00:e2:e7:01", tap: "tap0", timeout: wait}, false},
		{vm{fw: bios, mac: "52:54:00:e2:e7:02", tap: "tap1", timeout: wait}, false},
		{vm{fw: bios, mac: "52:54:00:e2:e7:03", tap: "tap2", timeout: wait}, false},
		{vm{fw: uefi, mac: ephMAC, tap: "tap3", timeout: wait}, true},
	}
	start := time.Now()
	t.Run("together", func(t *testing.T) {
		for _, c := range vms {
			t.Run(fmt.Sprintf("%s-%s", c.v.fw, c.v.mac), func(t *testing.T) {
				t.Parallel()
				if c.diskless {
					bootRoot(t, e, lan, dir, server, c.v)
				} else {
					boot(t, e, lan, dir, server, c.v)
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("four VMs booted together in %.0fs", time.Since(start).Seconds())

	var boots []struct {
		MAC   string `json:"mac"`
		State string `json:"state"`
	}
	cli.json(&boots, "boots")
	complete := map[string]bool{}
	for _, b := range boots {
		if b.State == "complete" {
			complete[b.MAC] = true
		}
	}
	for _, c := range vms {
		if !complete[c.v.mac] {
			t.Errorf("bootfleet boots has no complete boot for %s: %+v", c.v.mac, boots)
		}
	}

	web := proxyInto(t, lan, serverIP+":8080")
	ctx := startBrowser(t, 90*time.Second)
	err := chromedp.Do(ctx, chromedp.Navigate(web+"/"), chromedp.WaitVisible(`#auth`))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`localStorage.setItem("bootfleet-token", %q), true`, apiToken(t, dir))))
	}
	if err == nil {
		err = chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`#storm-count[data-complete="4"][data-machines="4"]`))
	}
	screenshot(ctx, dir, "storm-view.png")
	if err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(`#storm-count`))
		t.Fatalf("dashboard storm view: %v; it says %q, want 4 of 4 boots complete on 4 machines", err, text)
	}
}
