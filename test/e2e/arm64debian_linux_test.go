//go:build e2earm64

// The first build of the arm64 Debian root (debootstrap under qemu-user)
// takes too long for `make test`'s budget, so this test is built only
// with -tags e2earm64, which `make e2e-arm64` gives.

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needARM64Debian checks for what `scripts/mkdebian.sh --arch arm64`
// needs beyond the x86 Debian images: qemu-aarch64-static, which runs
// debootstrap's second stage in the arm64 tree.
func needARM64Debian(t *testing.T) {
	t.Helper()
	needDebianTools(t)
	if _, err := exec.LookPath("qemu-aarch64-static"); err != nil {
		if ciMode {
			t.Fatalf("BOOTFLEET_CI=1 but qemu-aarch64-static is missing; run scripts/deps.sh")
		}
		t.Skipf("qemu-aarch64-static not found (package qemu-user-static; run scripts/deps.sh)")
	}
}

// TestARM64DebianDiskless: a stock Debian 12 arm64 root (debootstrap
// --arch arm64 through qemu-user-static, systemd, systemd-networkd, the
// distribution's arm64 kernel) boots diskless on an arm64 virt machine:
// AAVMF PXE, the arm64 grub chain, the image's own kernel with an
// initramfs of the cross-compiled arm64 agent, the root over NBD with an
// ephemeral overlay. The image's unit reports multi-user, writes a marker
// into the overlay, reads it back, calls the DoneURL and reboots.
func TestARM64DebianDiskless(t *testing.T) {
	e := needEnv(t)
	a := needARM64(t, e)
	needNBD(t, e) // the tools the NBD root tests need
	needARM64Debian(t)
	dir := artifactDir(t)
	work := t.TempDir()

	raw := filepath.Join(work, "arm64-gpt-ext4.raw")
	makeDebianDisk(t, e, raw, "--arch", "arm64")
	// The kernel and modules come from the image, as for x86 images.
	initrd, vmlinuz := filepath.Join(work, "initrd.img"), filepath.Join(work, "vmlinuz")
	var stderr strings.Builder
	build := exec.Command(e.bin, "initramfs", "build", "--image", raw, "--agent", arm64Agent(t, e),
		"--busybox", a.busybox, "--out", initrd, "--kernel-out", vmlinuz)
	build.Stderr = &stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("bootfleet initramfs build --image (arm64 Debian): %v\n%s%s", err, out, stderr.String())
	}
	// stdout is "wrote FILE: kernel VERSION, modules ..."
	_, after, ok := strings.Cut(string(out), ": kernel ")
	f := strings.Fields(after)
	if !ok || len(f) == 0 {
		t.Fatalf("initramfs build printed no kernel version: %s", out)
	}
	kernel := strings.TrimSuffix(f[0], ",")
	if !strings.HasSuffix(kernel, "-arm64") {
		t.Fatalf("initramfs build took kernel %q from the image, want Debian's arm64 kernel", kernel)
	}

	lan := newLAN(t)
	lan.addTap(t, "tap0")
	startCapture(t, lan, dir)
	server, _ := serveRootImage(t, e, lan, dir, arm64DisklessConfig, map[string]string{
		"ShimARM64": a.shim, "GrubARM64": a.grub, "KernelARM64": vmlinuz, "NBDInitrd": initrd,
		"Cmdline": "console=ttyAMA0 quiet systemd.show_status=1 panic=-1 bf.name=arm-deb",
	}, serverIP, raw)

	const mac = "52:54:00:e2:a6:61"
	start := time.Now()
	q := startVM(t, e, lan, dir, vm{fw: aavmf, mac: mac, tap: "tap0"})
	defer q.stop()
	boots, err := followDebianBoots(t, q, start, mac, 1, 6*bootTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	b := boots[0]
	checkDebianBoot(t, "arm64 Debian boot", b, "ext4", kernel, false)
	if b.marker != "absent" || b.readback != "arm-deb" {
		t.Errorf("marker %q, read back %q; want absent on a fresh ephemeral root, then the write read back", b.marker, b.readback)
	}
	if b.shutdown != "Restarting system" {
		t.Errorf("ended with %q, want Restarting system (the unit's systemctl reboot must finish)", b.shutdown)
	}
	lines, _ := server.out.snapshot(0)
	if !anyLine(lines, `msg="boot complete"`, "mac="+mac) {
		t.Errorf("the root called its DoneURL but bootfleet logged no boot complete for %s", mac)
	}
	t.Logf("arm64 Debian diskless boot under TCG: multi-user and DoneURL, then reboot, %.0fs from QEMU start", time.Since(start).Seconds())
}
