package httpboot

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// archEnv is a fleet where pc1 (…:01) boots profile dual, which has an
// x86_64 and an arm64 kernel, pc2 (…:02) profile x86 (x86_64 only) and
// pc3 (…:03) profile arm (arm64 only), all through grub.
func archEnv(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	x86 := inventory.ArchBoot{Kernel: file("vmlinuz-amd64", "x86_64 kernel"), Initrd: []string{file("initrd-amd64", "x86_64 initrd")}}
	arm := inventory.ArchBoot{Kernel: file("vmlinuz-arm64", "arm64 kernel"), Initrd: []string{file("initrd-arm64", "arm64 initrd")}}
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"dual": {Name: "dual", Loader: inventory.LoaderGrub, Kernel: x86.Kernel, Initrd: x86.Initrd, ARM64: arm, Cmdline: "console=ttyS0 console=ttyAMA0"},
			"x86":  {Name: "x86", Loader: inventory.LoaderGrub, Kernel: x86.Kernel, Initrd: x86.Initrd},
			"arm":  {Name: "arm", Loader: inventory.LoaderGrub, ARM64: arm},
		},
		Machines: []machineview.Machine{enrolled("52:54:00:00:00:01", "pc1", "dual"), enrolled("52:54:00:00:00:02", "pc2", "x86"),
			enrolled("52:54:00:00:00:03", "pc3", "arm")},
		DefaultProfile: "x86",
		UnknownProfile: "x86",
	})
	return Config{Fleet: v, BaseURL: "http://10.0.0.1:8080", ServerIP: "10.0.0.1"}
}

// TestArchFiles: one profile, two architectures. Each grub (whichever
// asks: its stage-1 path says its architecture) gets a config naming its
// own architecture's kernel and initrd, over TFTP and HTTP, and those
// paths serve the right files; a machine whose profile has no kernel for
// the grub that asks gets no config and no kernel.
func TestArchFiles(t *testing.T) {
	c := archEnv(t)
	fsys := GrubTFTP(c, noFiles{})
	srv := httptest.NewServer(New(c))
	defer srv.Close()

	// Debian's grubnetaa64 reads the shared grub/grub.cfg, which must send
	// an arm64 grub to its arm64 config before the x86_64 one.
	if got, err := readTFTP(t, fsys, "grub/grub.cfg"); err != nil || !strings.Contains(got, `if [ "${grub_cpu}" = "arm64" ]; then`) ||
		strings.Index(got, "/arm64/grub.cfg") > strings.Index(got, "${net_default_mac}/grub.cfg") {
		t.Errorf("shared first config = %q, %v; want arm64 grubs sent to MAC/arm64/grub.cfg first", got, err)
	}
	if got, err := readTFTP(t, fsys, "grub/arm64-efi/grub.cfg"); err != nil || !strings.Contains(got, "configfile $prefix/${net_default_mac}/arm64/grub.cfg") {
		t.Errorf("arm64 first config over TFTP = %q, %v", got, err)
	}
	if code, body := get(t, srv.URL+"/grub/arm64-efi/grub.cfg"); code != 200 || !strings.Contains(body, "/arm64/grub.cfg") {
		t.Errorf("arm64 first config over HTTP = %d %q", code, body)
	}
	for _, tc := range []struct {
		path, kernel, initrd string
	}{
		{"grub/52:54:00:00:00:01/grub.cfg", "'/profiles/dual/kernel'", "'/profiles/dual/initrd/0/initrd-amd64'"},
		{"grub/52:54:00:00:00:01/arm64/grub.cfg", "'/profiles/dual/arm64/kernel'", "'/profiles/dual/arm64/initrd/0/initrd-arm64'"},
		{"grub/52:54:00:00:00:03/arm64/grub.cfg", "'/profiles/arm/arm64/kernel'", "'/profiles/arm/arm64/initrd/0/initrd-arm64'"},
	} {
		cfg, err := readTFTP(t, fsys, tc.path)
		if err != nil || !strings.Contains(cfg, "if linux "+tc.kernel) || !strings.Contains(cfg, "if initrd "+tc.initrd) {
			t.Errorf("%s over TFTP = %v:\n%s\nwant kernel %s and initrd %s", tc.path, err, cfg, tc.kernel, tc.initrd)
		}
		if code, body := get(t, srv.URL+"/"+tc.path); code != 200 || body != cfg {
			t.Errorf("%s over HTTP = %d, differs from TFTP:\n%s", tc.path, code, body)
		}
	}
	for path, want := range map[string]string{
		"profiles/dual/kernel":                      "x86_64 kernel",
		"profiles/dual/initrd/0/initrd-amd64":       "x86_64 initrd",
		"profiles/dual/arm64/kernel":                "arm64 kernel",
		"profiles/dual/arm64/initrd/0/initrd-arm64": "arm64 initrd",
		"profiles/arm/arm64/kernel":                 "arm64 kernel",
	} {
		if got, err := readTFTP(t, fsys, path); err != nil || got != want {
			t.Errorf("%s over TFTP = %q, %v; want %q", path, got, err, want)
		}
		if code, body := get(t, srv.URL+"/"+path); code != 200 || body != want {
			t.Errorf("%s over HTTP = %d %q; want %q", path, code, body, want)
		}
	}
	// No architecture gets another's files.
	for _, path := range []string{"grub/52:54:00:00:00:02/arm64/grub.cfg", "grub/52:54:00:00:00:03/grub.cfg",
		"profiles/x86/arm64/kernel", "profiles/arm/kernel", "profiles/arm/initrd/0/initrd-arm64", "profiles/dual/arm64/initrd/1/x"} {
		if got, err := readTFTP(t, fsys, path); err == nil {
			t.Errorf("%s over TFTP = %q; want it refused", path, got)
		}
		if code, body := get(t, srv.URL+"/"+path); code == 200 {
			t.Errorf("%s over HTTP = %d %q; want it refused", path, code, body)
		}
	}
	if _, body := get(t, srv.URL+"/grub/52:54:00:00:00:03/grub.cfg"); !strings.Contains(body, "has no x86_64 kernel") {
		t.Errorf("x86_64 config of an arm64-only machine: %q, want it to say the profile has no x86_64 kernel", body)
	}
	// iPXE built for arm64 asks for its script with ?arch=arm64.
	if code, body := get(t, srv.URL+"/ipxe/52-54-00-00-00-01?arch=arm64"); code != 200 || !strings.Contains(body, "/profiles/dual/arm64/kernel") {
		t.Errorf("arm64 iPXE script = %d:\n%s\nwant the arm64 kernel", code, body)
	}
	if code, body := get(t, srv.URL+"/ipxe/52-54-00-00-00-01"); code != 200 || !strings.Contains(body, "/profiles/dual/kernel?") {
		t.Errorf("x86_64 iPXE script = %d:\n%s\nwant the x86_64 kernel", code, body)
	}
}
