package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInitramfsBuildArgs covers the command's own checks; building real
// archives is internal/initramfs's test, and booting them test/e2e's.
func TestInitramfsBuildArgs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "initrd.img")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{"initramfs", "build", "--modules-dir", "/x"}, "error: --out FILE is required"},
		{"kernel-out without deb", []string{"initramfs", "build", "--modules-dir", "/x", "--out", out, "--kernel-out", out + ".k"}, "error: --kernel-out needs --kernel-deb"},
		{"no kernel", []string{"initramfs", "build", "--out", out, "--agent", "/bin/busybox"}, "give exactly one of --kernel-deb"},
		{"missing agent", []string{"initramfs", "build", "--modules-dir", "/x", "--out", out, "--agent", "/nonexistent/agent"}, "CGO_ENABLED=0 go build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, tc.args...); !strings.Contains(got, tc.want) {
				t.Errorf("bootfleet %s:\n%s\nwant it to contain %q", strings.Join(tc.args, " "), got, tc.want)
			}
		})
	}
}
