package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/config"
)

// TestGrubARM64DiskMissing: a secure_boot.grub_arm64_disk that is not a
// file stops the server at start, naming the key, rather than failing
// each arm64 HTTP Boot later.
func TestGrubARM64DiskMissing(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "shimaa64.efi.signed")
	if err := os.WriteFile(shim, []byte("shim"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &config.Config{}
	c.IPXE.Dir = dir
	c.SecureBoot.ShimARM64 = shim
	c.SecureBoot.GrubARM64Disk = filepath.Join(dir, "grubaa64.efi.signed")
	if roots, err := servedRoots(c); err == nil {
		roots.Close()
		t.Fatal("servedRoots accepted a missing secure_boot.grub_arm64_disk")
	} else if !strings.Contains(err.Error(), "secure_boot.grub_arm64_disk") {
		t.Errorf("error %q does not name secure_boot.grub_arm64_disk", err)
	}
	if err := os.WriteFile(c.SecureBoot.GrubARM64Disk, []byte("grub"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := servedRoots(c)
	if err != nil {
		t.Fatalf("servedRoots with the file in place: %v", err)
	}
	roots.Close()
}
