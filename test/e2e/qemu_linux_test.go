package e2e

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// firmware is how a VM network-boots.
type firmware string

const (
	// uefi is OVMF with QEMU's NIC option ROM removed (romfile=), so OVMF's
	// own network stack does PXEv4 and must be handed ipxe.efi over TFTP.
	uefi firmware = "uefi"
	// bios is SeaBIOS with QEMU's default virtio-net ROM, which is iPXE: it
	// asks DHCP for its script URL directly, without a TFTP hop.
	bios firmware = "bios"
	// uefiHTTP is uefi with OVMF's PXE (IPv4 and IPv6) switched off through
	// fw_cfg (EDK II's OvmfPkg reads opt/org.tianocore/IPv4PXESupport and
	// IPv6PXESupport into NetworkPkg's PCDs), so its boot manager's first
	// network option is HTTPv4: the firmware's own HTTP boot client.
	uefiHTTP firmware = "uefi-http"
	// uefiSecure is OVMF's Secure Boot build with Microsoft's keys
	// enrolled (Debian's OVMF_VARS_4M.ms.fd) on q35 with SMM, which
	// keeps the variable store out of the guest's reach: only a chain
	// signed by those keys boots.
	uefiSecure firmware = "uefi-secure"
	// uefiPXE6 is uefi with PXE over IPv4 switched off, so PXEv6 is its
	// boot manager's first network option.
	uefiPXE6 firmware = "uefi-pxe6"
)

// OVMF's Secure Boot build, from Debian's ovmf package.
const (
	ovmfSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// vm describes one test VM.
type vm struct {
	fw  firmware
	mac string // lower case with colons
	tap string // tap device on br0, from netns.addTap
	// cmdline, when set, skips the network boot: QEMU loads the test
	// image's kernel and initrd itself (-kernel) with this command line.
	cmdline string
	// timeout bounds the boot instead of bootTimeout: VMs booting
	// together share the CPUs.
	timeout time.Duration
	// initrd, with cmdline, replaces the test image's initrd.
	initrd string
	// extra are more QEMU arguments, e.g. a local disk.
	extra []string
}

// waitFor is how long to wait for v's boot.
func (v vm) waitFor(t testing.TB) time.Duration {
	if v.timeout > 0 {
		return v.timeout
	}
	return bootTimeout(t)
}

// startVM runs QEMU inside ns with its serial console as the process output,
// saved to dir/serial-<mac>.log. -no-reboot turns a guest reboot or kernel
// panic into a QEMU exit, so a broken boot ends the wait early.
func startVM(t testing.TB, e *env, ns *netns, dir string, v vm) *proc {
	t.Helper()
	if v.fw == aavmf || v.fw == aavmfSecure {
		return startARM64VM(t, ns, dir, v)
	}
	args := qemuArgs(t, e, v)
	name := "qemu-" + string(v.fw) + "-" + v.mac
	os.WriteFile(filepath.Join(dir, name+".cmd"), []byte("qemu-system-x86_64 "+strings.Join(args, " ")+"\n"), 0o644)
	cmd := ns.command("qemu-system-x86_64", args...)
	return startProc(t, name, cmd, filepath.Join(dir, "serial-"+strings.ReplaceAll(v.mac, ":", "-")+".log"))
}

// qemuArgs is the QEMU command line for v, its serial console on stdout.
func qemuArgs(t testing.TB, e *env, v vm) []string {
	t.Helper()
	nic := "virtio-net-pci,netdev=n0,mac=" + v.mac
	args := []string{
		"-accel", "tcg", "-m", "512", "-smp", "1",
		"-nographic", "-serial", "stdio", "-monitor", "none", "-no-reboot",
		"-netdev", "tap,id=n0,ifname=" + v.tap + ",script=no,downscript=no",
	}
	switch v.fw {
	case uefi, uefiHTTP, uefiPXE6:
		// A private copy because OVMF writes its variable store (boot
		// options) into the flash image.
		fd := filepath.Join(t.TempDir(), "OVMF.fd")
		copyFile(t, e.ovmf, fd)
		args = append(args, "-drive", "if=pflash,format=raw,file="+fd)
		if v.fw == uefiPXE6 {
			args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n")
		}
		if v.fw == uefiHTTP {
			args = append(args,
				"-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
		}
	case uefiSecure:
		vars := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
		copyFile(t, ovmfSecureVars, vars)
		args = append(args, "-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfSecureCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	case bios:
	default:
		t.Fatalf("unknown firmware %q", v.fw)
	}
	switch {
	case v.cmdline != "":
		initrd := e.initrd
		if v.initrd != "" {
			initrd = v.initrd
		}
		args = append(args, "-kernel", e.vmlinuz, "-initrd", initrd, "-append", v.cmdline,
			"-device", nic+",romfile=")
	case v.fw == uefi || v.fw == uefiHTTP || v.fw == uefiSecure || v.fw == uefiPXE6:
		// bootindex puts the NIC first in OVMF's boot order, ahead of the
		// EFI shell, which would otherwise wait at its prompt.
		args = append(args, "-device", nic+",romfile=,bootindex=1")
	default:
		args = append(args, "-boot", "n", "-device", nic)
	}
	return append(args, v.extra...)
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
