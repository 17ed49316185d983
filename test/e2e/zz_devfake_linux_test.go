package e2e

// TEMPORARY dev-only harness check against dnsmasq + python; delete before handover.

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func startFake(t *testing.T, e *env, ns *netns, dir string) *proc {
	root := t.TempDir()
	copyFile(t, e.vmlinuz, filepath.Join(root, "vmlinuz"))
	copyFile(t, e.initrd, filepath.Join(root, "initrd.img"))
	tftp := t.TempDir()
	copyFile(t, "/usr/lib/ipxe/ipxe.efi", filepath.Join(tftp, "ipxe.efi"))
	os.Chmod(tftp, 0o755)
	cmd := ns.command("bash", "-c", "dnsmasq --no-daemon --conf-file=/dev/null --port=0 --interface=br0 --bind-interfaces --dhcp-range=10.213.0.100,10.213.0.200,1h --enable-tftp --tftp-root="+tftp+
		" --dhcp-match=set:ipxe,175 --dhcp-boot=tag:!ipxe,ipxe.efi --dhcp-boot=tag:ipxe,http://10.213.0.1:8080/ipxe/\\${mac} --dhcp-leasefile="+root+"/l --pid-file="+root+"/p --user=root & exec python3 -u /tmp/bfdev/fake.py "+root)
	p := startProc(t, "fake", cmd, filepath.Join(dir, "fake.log"))
	if err := ns.waitTCP(serverIP, 8080, 15*time.Second, p.alive); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDevFake(t *testing.T) {
	e := needEnv(t)
	for _, fw := range []firmware{bios, uefi} {
		t.Run(string(fw), func(t *testing.T) {
			dir := artifactDir(t)
			lan := newLAN(t)
			lan.addTap(t, "tap0")
			s := startFake(t, e, lan, dir)
			res := boot(t, e, lan, dir, s, vm{fw: fw, mac: listedMAC, tap: "tap0"})
			checkProfile(t, res.cmdline, specialProfile)
		})
	}
}
