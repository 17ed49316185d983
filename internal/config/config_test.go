package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const minimal = `
interface: br0
dhcp:
  range: 10.213.0.100-10.213.0.200
profiles:
  linux:
    kernel: /srv/vmlinuz
`

func TestDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"data", c.Data, "/var/lib/bootfleet"},
		{"dhcp.mode", c.DHCP.Mode, "full"},
		{"dhcp.lease", time.Duration(c.DHCP.Lease).String(), "1h0m0s"},
		{"tftp.listen", c.TFTP.Listen, ":69"},
		{"http.listen", c.HTTP.Listen, ":8080"},
		{"nbd.listen", c.NBD.Listen, ":10809"},
		{"ipxe.dir", c.IPXE.Dir, "/usr/lib/ipxe"},
		{"ipxe.efi_binary", c.IPXE.EFIBinary, "ipxe.efi"},
		{"ipxe.bios_binary", c.IPXE.BIOSBinary, "undionly.kpxe"},
		{"log.format", c.Log.Format, "text"},
		{"ipv6_ra", c.IPv6RA, "auto"},
	}
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			if ch.got != ch.want {
				t.Fatalf("got %q, want %q", ch.got, ch.want)
			}
		})
	}
	if c.TFTP.MaxWindow != 64 {
		t.Fatalf("tftp.max_window = %d, want 64", c.TFTP.MaxWindow)
	}
}

func TestExampleConfigParses(t *testing.T) {
	f, err := os.Open("../../examples/bootfleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		t.Fatalf("examples/bootfleet.yaml: %v", err)
	}
	if c.Profiles["linux"].Cmdline == "" || len(c.Machines) == 0 {
		t.Fatalf("example lost its profile or machines: %+v", c)
	}
}

func TestValidationErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad mode", "interface: br0\ndhcp: {mode: relay}", "dhcp.mode: want full, proxy or off"},
		{"bad ipv6_ra", "interface: br0\ndhcp: {mode: proxy}\nipv6_ra: on", `ipv6_ra: want auto (answer IPv6 router solicitations while no router is on the link) or off, got "on"`},
		{"missing range", "interface: br0", "dhcp.range: want first-last"},
		{"reversed range", "interface: br0\ndhcp: {range: 10.0.0.9-10.0.0.1}", "is after last"},
		{"range in proxy", "interface: br0\ndhcp: {mode: proxy, range: 10.0.0.1-10.0.0.9}", "only used in full mode"},
		{"no interface", "dhcp: {mode: proxy}", "interface: required"},
		{"bad lease", "interface: br0\ndhcp: {mode: proxy, lease: soon}", "want a duration"},
		{"short lease", "interface: br0\ndhcp: {mode: proxy, lease: 5s}", "dhcp.lease: want at least 1m"},
		{"bad router", "interface: br0\ndhcp: {range: 10.0.0.1-10.0.0.9, router: x}", "dhcp.router"},
		{"bad dns", "interface: br0\ndhcp: {range: 10.0.0.1-10.0.0.9, dns: [1.2.3.4, nope]}", "dhcp.dns[1]"},
		{"unknown key", "interface: br0\ndhcp: {mode: proxy}\ntftp: {rot: /x}", "field rot not found"},
		{"default profile missing", "interface: br0\ndhcp: {mode: proxy}\ndefault_profile: x", `default_profile: no profile named "x"`},
		{"profile without kernel", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {cmdline: x}}", "profiles.a.kernel: required"},
		{"bad overlay", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, root: {image: d, overlay: ram}}}", "profiles.a.root.overlay: want ephemeral, persistent, none, client-ram or client-disk"},
		{"client-disk without cache", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, root: {image: d, overlay: client-disk}}}", "profiles.a.root.overlay: client-disk needs the local disk to wipe"},
		{"overlay without image", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, root: {overlay: none}}}", "profiles.a.root.image: required"},
		{"bad root kernel", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, root: {image: d, kernel: own}}}", `profiles.a.root.kernel: want image (boot the kernel in the root image) or nothing (boot the profile's kernel), got "own"`},
		{"image kernel without image", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {root: {kernel: image}}}", "profiles.a.root.image: required when root.kernel is image"},
		{"image kernel and kernel", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, root: {image: d, kernel: image}}}", "profiles.a.kernel: must be empty with root.kernel: image, which boots the kernel in the root image; remove kernel"},
		{"image kernel and initrd", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {initrd: [i], root: {image: d, kernel: image}}}", "profiles.a.initrd: must be empty with root.kernel: image"},
		{"bad mac", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: zz}]", "machines[0].mac: want an Ethernet MAC"},
		{"dup mac", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01'}, {mac: '52-54-00-00-00-01'}]", "machines[1].mac: 52:54:00:00:00:01 is already listed at machines[0]"},
		{"bad machine name", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01', name: pc_1}]", `machines[0].name: "pc_1" is not a host name (RFC 1123): '_' at position 3`},
		{"file path", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, files: [{path: etc/motd, template: x}]}}", `profiles.a.files[0].path: want an absolute, clean path`},
		{"file mode", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, files: [{path: /etc/motd, mode: '0999', template: x}]}}", `profiles.a.files[0].mode: want an octal mode`},
		{"file both", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, files: [{path: /etc/motd, template: x, template_file: /t}]}}", `profiles.a.files[0]: set exactly one of template`},
		{"file twice", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, files: [{path: /x, template: a}, {path: /x, template: b}]}}", `profiles.a.files[1].path: /x is already at files[0]`},
		{"relative template file", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, files: [{path: /x, template_file: t.tmpl}]}}", `template_file: want an absolute path`},
		{"file owner", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01', files: [{path: /x, template: a, owner: 'a b'}]}]", `machines[0].files[0].owner`},
		{"var name", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, vars: {kiosk-url: x}}}", `profiles.a.vars.kiosk-url: want a name of letters`},
		{"unknown machine profile", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01', profile: p}]", "machines[0].profile"},
		{"reservation in proxy", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01', ip: 10.0.0.5}]", "reservations need dhcp.mode: full"},
		{"bad machine root channel", "interface: br0\ndhcp: {mode: proxy}\nmachines: [{mac: '52:54:00:00:00:01', root_channel: latest}]", "machines[0].root_channel: want production, test or a version number"},
		{"dup reservation", "interface: br0\ndhcp: {range: 10.0.0.1-10.0.0.9}\nmachines: [{mac: '52:54:00:00:00:01', ip: 10.0.0.5}, {mac: '52:54:00:00:00:02', ip: 10.0.0.5}]", "10.0.0.5 is already reserved"},
		{"bad window", "interface: br0\ndhcp: {mode: proxy}\ntftp: {max_window: 70000}", "tftp.max_window: want 1..65535"},
		{"bad discovery", "interface: br0\ndhcp: {mode: proxy}\ndiscovery: maybe", "discovery: want boot or ignore"},
		{"unknown discovery profile", "interface: br0\ndhcp: {mode: proxy}\ndiscovery_profile: x", `discovery_profile: no profile named "x"`},
		{"bad telemetry", "interface: br0\ndhcp: {mode: proxy}\ntelemetry: maybe", "telemetry: want on or off"},
		{"bad loader", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, loader: shim}}", `profiles.a.loader: want ipxe (default) or grub (Secure Boot through Debian's signed shim and grub), got "shim"`},
		{"grub loader without secure_boot", "interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, loader: grub}}", "profiles.a.loader: grub needs secure_boot.shim and secure_boot.grub"},
		{"grub loader without grub", "interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {shim: /s}\nprofiles: {a: {kernel: k, loader: grub}}", "profiles.a.loader: grub needs secure_boot.shim and secure_boot.grub"},
		{"grub loader for arm64 without its chain", "interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {shim: /s, grub: /g}\nprofiles: {a: {kernel: k, arm64: {kernel: ak}, loader: grub}}", "profiles.a.loader: grub with an arm64 kernel needs secure_boot.shim_arm64 and secure_boot.grub_arm64"},
		{"arm64 disk grub without shim", "interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {grub_arm64_disk: /g/grubaa64.efi.signed}", "secure_boot.grub_arm64_disk: needs secure_boot.shim_arm64"},
		{"bad dhcp6 mode", "interface: br0\ndhcp: {mode: proxy}\ndhcp6: {mode: relay}", `dhcp6.mode: want full, proxy or off, got "relay"`},
		{"dhcp6 range in proxy mode", "interface: br0\ndhcp: {mode: off}\ndhcp6: {mode: proxy, range: 'fd00::1-fd00::9'}", "dhcp6.range: only used with dhcp6.mode: full"},
		{"dhcp6 range not v6", "interface: br0\ndhcp: {mode: proxy}\ndhcp6: {mode: full, range: 10.0.0.1-10.0.0.9}", "dhcp6.range: want two IPv6 addresses"},
		{"dhcp6 range across /64s", "interface: br0\ndhcp: {mode: proxy}\ndhcp6: {mode: full, range: 'fd00:1::1-fd00:2::1'}", "are not in one /64"},
		{"dhcp6 range when off", "interface: br0\ndhcp: {mode: proxy}\ndhcp6: {range: 'fd00::1-fd00::9'}", "dhcp6.range: only used with dhcp6.mode: full"},
		{"dhcp6 without ra", "interface: br0\ndhcp: {mode: proxy}\nipv6_ra: off\ndhcp6: {mode: full, range: 'fd00::1-fd00::9'}", "ipv6_ra: dhcp6.mode full needs router advertisements"},
		{"v6 server_ip with dhcp", "interface: br0\ndhcp: {mode: proxy}\nserver_ip: 'fd00::1'", "an IPv6 server_ip needs dhcp.mode: off"},
		{"link-local server_ip", "interface: br0\ndhcp: {mode: off}\nserver_ip: 'fe80::1'", "is link-local"},
		{"nic drivers none and more", "interface: br0\ndhcp: {mode: proxy}\nnbd: {nic_drivers: [none, igb]}", "nbd.nic_drivers: NIC drivers \"none,igb\": none cannot go with driver names"},
		{"nic driver name", "interface: br0\ndhcp: {mode: proxy}\nnbd: {nic_drivers: [e1000e, ../x]}", `nbd.nic_drivers: NIC driver "../x": want a kernel module name`},
		{"bad log format", "interface: br0\ndhcp: {mode: proxy}\nlog: {format: xml}", "log.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatal("want an error, got none")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

// TestRootKernelImage: a profile booting its image's kernel needs neither
// kernel nor initrd, and keeps the overlay default.
func TestRootKernelImage(t *testing.T) {
	c, err := Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\nnbd: {agent: /opt/bootfleet-agent}\nprofiles: {a: {cmdline: quiet, root: {image: debian, kernel: image}}}"))
	if err != nil {
		t.Fatal(err)
	}
	want := Root{Image: "debian", Overlay: "ephemeral", Kernel: inventory.RootKernelImage}
	if got := c.Profiles["a"].Root; got != want {
		t.Fatalf("root = %+v, want %+v", got, want)
	}
	if c.NBD.Agent != "/opt/bootfleet-agent" {
		t.Fatalf("nbd.agent = %q, want /opt/bootfleet-agent", c.NBD.Agent)
	}
}

func TestDHCPOffNeedsNoInterface(t *testing.T) {
	if _, err := Parse(strings.NewReader("dhcp: {mode: off}")); err != nil {
		t.Fatal(err)
	}
}

func TestGrubLoader(t *testing.T) {
	c, err := Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {shim: /s/shimx64.efi.signed, grub: /g/grubnetx64.efi.signed}\nprofiles: {sb: {kernel: k, loader: grub}, plain: {kernel: k, loader: ipxe}}"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Profiles["sb"].Loader != inventory.LoaderGrub || c.SecureBoot.Shim != "/s/shimx64.efi.signed" || c.SecureBoot.Grub != "/g/grubnetx64.efi.signed" {
		t.Fatalf("secure_boot %+v, profile sb %+v", c.SecureBoot, c.Profiles["sb"])
	}
}

// TestGrubLoaderARM64: an arm64-only grub profile needs only the arm64
// chain; a profile with both kernels reads both.
func TestGrubLoaderARM64(t *testing.T) {
	c, err := Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {shim_arm64: /s/shimaa64.efi.signed, grub_arm64: /g/grubnetaa64.efi.signed}\n" +
		"profiles: {arm: {arm64: {kernel: /a/vmlinuz, initrd: [/a/initrd.img]}, loader: grub}}"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Profiles["arm"]; p.ARM64.Kernel != "/a/vmlinuz" || len(p.ARM64.Initrd) != 1 || c.SecureBoot.ShimARM64 != "/s/shimaa64.efi.signed" || c.SecureBoot.GrubARM64 != "/g/grubnetaa64.efi.signed" {
		t.Fatalf("secure_boot %+v, profile arm %+v", c.SecureBoot, p)
	}
	if _, err := Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\nsecure_boot: {shim_arm64: /s, grub_arm64: /g}\nprofiles: {both: {kernel: k, arm64: {kernel: ak}, loader: grub}}")); err == nil || !strings.Contains(err.Error(), "grub needs secure_boot.shim and secure_boot.grub") {
		t.Fatalf("a grub profile with an x86_64 kernel and no x86_64 chain: %v, want it refused", err)
	}
}

// TestIPv6Only: an IPv6-only network is dhcp off, dhcp6 full and an IPv6
// server_ip.
func TestIPv6Only(t *testing.T) {
	c, err := Parse(strings.NewReader("interface: br0\nserver_ip: 'fd00:213::1'\ndhcp: {mode: off}\ndhcp6: {mode: full, range: 'fd00:213::100-fd00:213::1ff'}"))
	if err != nil {
		t.Fatal(err)
	}
	first, last, err := c.DHCP6.ParseRange()
	if err != nil || first.String() != "fd00:213::100" || last.String() != "fd00:213::1ff" || time.Duration(c.DHCP6.Lease) != time.Hour {
		t.Fatalf("dhcp6 %+v: range %v-%v (%v)", c.DHCP6, first, last, err)
	}
}

// TestClientOverlays: the client-side caches are accepted, client-disk
// with its cache device on the cmdline.
func TestClientOverlays(t *testing.T) {
	for _, tt := range []struct{ overlay, cmdline string }{
		{"client-ram", "quiet"},
		{"client-ram", "quiet bootfleet.cache.size=1G"},
		{"client-disk", "quiet bootfleet.cache=/dev/vda"},
		{"client-disk", "bootfleet.cache=LABEL=bfcache"},
	} {
		t.Run(tt.overlay+" "+tt.cmdline, func(t *testing.T) {
			c, err := Parse(strings.NewReader("interface: br0\ndhcp: {mode: proxy}\nprofiles: {a: {kernel: k, cmdline: \"" + tt.cmdline + "\", root: {image: d, overlay: " + tt.overlay + "}}}"))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Profiles["a"].Root.Overlay; got != tt.overlay || !inventory.ClientOverlay(got) {
				t.Fatalf("overlay = %q, want %q, a client overlay", got, tt.overlay)
			}
		})
	}
}
