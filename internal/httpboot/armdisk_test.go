package httpboot

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// armDiskEnv is archEnv serving arm64 disk images, with milestones.
func armDiskEnv(t *testing.T) (Config, *milestones) {
	t.Helper()
	c := archEnv(t)
	dir := t.TempDir()
	c.DiskARM64 = DiskChain{Shim: filepath.Join(dir, "shimaa64.efi.signed"), Grub: filepath.Join(dir, "grubaa64.efi.signed")}
	for p, content := range map[string]string{c.DiskARM64.Shim: "signed shim", c.DiskARM64.Grub: "signed grub"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &milestones{}
	c.Milestones = m
	return c, m
}

func fetch(t *testing.T, method, url string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestARMDisk: an arm64 machine's disk image has the size its HEAD
// announced (the firmware sizes its RAM disk by it), is a FAT image
// typed for EDK II's HTTP Boot, and holds shim where the firmware boots,
// grub beside it, the machine's grub.cfg where Debian's grubaa64 reads
// it, and its profile's arm64 kernel and initrd, which the config loads.
func TestARMDisk(t *testing.T) {
	mcopy, err := exec.LookPath("mcopy")
	if err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatal("BOOTFLEET_CI=1 but mcopy is missing; run scripts/deps.sh")
		}
		t.Skip("mcopy not found (package mtools; run scripts/deps.sh)")
	}
	c, m := armDiskEnv(t)
	srv := httptest.NewServer(New(c))
	defer srv.Close()
	url := srv.URL + "/grub/52-54-00-00-00-01/arm64/disk.img"

	head, _ := fetch(t, http.MethodHead, url)
	if len(m.got) != 0 {
		t.Errorf("HEAD recorded milestones %v; only the GET that boots may", m.got)
	}
	resp, body := fetch(t, http.MethodGet, url)
	if resp.StatusCode != 200 || head.StatusCode != 200 {
		t.Fatalf("HEAD %d, GET %d: %s", head.StatusCode, resp.StatusCode, body)
	}
	for _, r := range []*http.Response{head, resp} {
		if ct := r.Header.Get("Content-Type"); ct != "application/vnd.efi-img" {
			t.Errorf("%s Content-Type %q, want application/vnd.efi-img", r.Request.Method, ct)
		}
	}
	if head.ContentLength != int64(len(body)) || resp.ContentLength != int64(len(body)) {
		t.Errorf("HEAD says %d bytes, GET %d, body %d; want all equal", head.ContentLength, resp.ContentLength, len(body))
	}
	if want := []string{"52:54:00:00:00:01 " + MilestoneGrubConfig}; !slices.Equal(m.got, want) {
		t.Errorf("milestones %v, want %v", m.got, want)
	}

	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, body, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		t.Helper()
		out, err := exec.Command(mcopy, "-i", img, "::/"+p, "-").Output()
		if err != nil {
			t.Fatalf("mcopy ::/%s: %v", p, err)
		}
		return string(out)
	}
	for p, want := range map[string]string{
		"EFI/BOOT/BOOTAA64.EFI":           "signed shim",
		"EFI/BOOT/grubaa64.efi":           "signed grub",
		"bootfleet/vmlinuz":               "arm64 kernel",
		"bootfleet/initrd/0/initrd-arm64": "arm64 initrd",
	} {
		if got := read(p); got != want {
			t.Errorf("%s in the image = %q, want %q", p, got, want)
		}
	}
	cfg := strings.TrimRight(read("EFI/debian/grub.cfg"), "\n")
	for _, want := range []string{"if linux '/bootfleet/vmlinuz' 'console=ttyS0' 'console=ttyAMA0'", "if initrd '/bootfleet/initrd/0/initrd-arm64'"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("grub.cfg in the image lacks %q:\n%s", want, cfg)
		}
	}
}

// TestARMDiskRefused: no image for a machine whose profile has no arm64
// kernel, or on a server without the disk chain.
func TestARMDiskRefused(t *testing.T) {
	c, m := armDiskEnv(t)
	srv := httptest.NewServer(New(c))
	defer srv.Close()
	if resp, body := fetch(t, http.MethodGet, srv.URL+"/grub/52-54-00-00-00-02/arm64/disk.img"); resp.StatusCode == 200 || !strings.Contains(string(body), "has no arm64 kernel") {
		t.Errorf("image of an x86_64-only machine: %d %q; want it refused, saying the profile has no arm64 kernel", resp.StatusCode, body)
	}
	if len(m.got) != 0 {
		t.Errorf("a refused image recorded milestones %v", m.got)
	}
	c.DiskARM64 = DiskChain{}
	srv2 := httptest.NewServer(New(c))
	defer srv2.Close()
	if resp, body := fetch(t, http.MethodGet, srv2.URL+"/grub/52-54-00-00-00-01/arm64/disk.img"); resp.StatusCode != 404 {
		t.Errorf("image from a server without the disk chain: %d %q, want 404", resp.StatusCode, body)
	}
}
