package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// startBrowser starts headless chromium for a dashboard check and returns
// a context bounded by timeout; the browser stops when the test ends.
func startBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	chrome, err := exec.LookPath("chromium")
	if err != nil {
		if ciMode {
			t.Fatalf("BOOTFLEET_CI=1 but chromium is missing; run scripts/deps.sh as root")
		}
		t.Skip("chromium not installed; run scripts/deps.sh as root")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1100),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	// The first call starts the browser; a timeout on it would stop it.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(func() {
		cancel()
		cancelBrowser()
		cancelAlloc()
	})
	return ctx
}

// openDashboard loads the dashboard at web with the API token in the
// browser's storage, as an admin who pasted it, and runs wait, e.g. a
// WaitVisible for what the test reads.
func openDashboard(ctx context.Context, web, token string, wait ...chromedp.Action[chromedp.Void]) error {
	err := chromedp.Do(ctx, chromedp.Navigate(web+"/"))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`localStorage.setItem("bootfleet-token", %q), true`, token)))
	}
	if err == nil {
		err = chromedp.Do(ctx, append([]chromedp.Action[chromedp.Void]{chromedp.Reload()}, wait...)...)
	}
	return err
}

// screenshot saves the page as dir/name, for post-mortems.
func screenshot(ctx context.Context, dir, name string) {
	if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(dir, name), shot, 0o644)
	}
}
