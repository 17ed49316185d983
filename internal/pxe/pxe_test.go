package pxe

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

var mac = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

func request(t *testing.T, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.NewDiscovery(mac)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		m.UpdateOption(o)
	}
	return m
}

func vc(s string) dhcpv4.Option { return dhcpv4.OptClassIdentifier(s) }
func arch(a ...byte) dhcpv4.Option {
	return dhcpv4.OptGeneric(dhcpv4.OptionClientSystemArchitectureType, a)
}
func uc(b string) dhcpv4.Option {
	return dhcpv4.OptGeneric(dhcpv4.OptionUserClassInformation, []byte(b))
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name     string
		opts     []dhcpv4.Option
		want     Client
		firmware string
	}{
		{"os", []dhcpv4.Option{vc("udhcp 1.36")}, Client{VendorClass: "udhcp 1.36"}, "os"},
		{"no options", nil, Client{}, "os"},
		{"bios pxe", []dhcpv4.Option{vc("PXEClient:Arch:00000:UNDI:002001"), arch(0, 0)},
			Client{Arch: ArchBIOS, HasArch: true, PXE: true, VendorClass: "PXEClient:Arch:00000:UNDI:002001"}, "bios"},
		{"ovmf x64", []dhcpv4.Option{vc("PXEClient:Arch:00007:UNDI:003000"), arch(0, 7)},
			Client{Arch: ArchEFIx64, HasArch: true, PXE: true, VendorClass: "PXEClient:Arch:00007:UNDI:003000"}, "uefi-x64"},
		{"efi bc", []dhcpv4.Option{vc("PXEClient"), arch(0, 9)},
			Client{Arch: ArchEFIBC, HasArch: true, PXE: true, VendorClass: "PXEClient"}, "uefi-bc"},
		{"arch list takes first", []dhcpv4.Option{vc("PXEClient"), arch(0, 11, 0, 7)},
			Client{Arch: ArchEFIARM64, HasArch: true, PXE: true, VendorClass: "PXEClient"}, "uefi-arm64"},
		{"arch from vendor class only", []dhcpv4.Option{vc("PXEClient:Arch:00006:UNDI:003000")},
			Client{Arch: ArchEFIIA32, HasArch: true, PXE: true, VendorClass: "PXEClient:Arch:00006:UNDI:003000"}, "uefi-ia32"},
		{"short option 93 ignored", []dhcpv4.Option{vc("PXEClient"), arch(7)},
			Client{PXE: true, VendorClass: "PXEClient"}, "bios"},
		{"http boot", []dhcpv4.Option{vc("HTTPClient:Arch:00016:UNDI:003001"), arch(0, 16)},
			Client{Arch: ArchEFIx64HTTP, HasArch: true, HTTPBoot: true, VendorClass: "HTTPClient:Arch:00016:UNDI:003001"}, "uefi-x64-http"},
		{"http arch without vendor class", []dhcpv4.Option{arch(0, 19)},
			Client{Arch: ArchEFIARM64HTTP, HasArch: true, HTTPBoot: true}, "uefi-arm64-http"},
		{"ipxe bios raw user class", []dhcpv4.Option{vc("PXEClient:Arch:00000:UNDI:002001"), arch(0, 0), uc("iPXE")},
			Client{Arch: ArchBIOS, HasArch: true, PXE: true, IPXE: true, VendorClass: "PXEClient:Arch:00000:UNDI:002001", UserClass: "iPXE"}, "ipxe-bios"},
		{"ipxe rfc3004 user class", []dhcpv4.Option{arch(0, 7), uc("\x03foo\x04iPXE")},
			Client{Arch: ArchEFIx64, HasArch: true, IPXE: true, UserClass: `"\x03foo\x04iPXE"`}, "ipxe-uefi-x64"},
		{"ipxe by option 175 only", []dhcpv4.Option{vc("PXEClient"), arch(0, 7), dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(175), []byte{0xb1, 1, 1})},
			Client{Arch: ArchEFIx64, HasArch: true, PXE: true, IPXE: true, VendorClass: "PXEClient"}, "ipxe-uefi-x64"},
		{"other user class", []dhcpv4.Option{uc("gPXE")}, Client{UserClass: "gPXE"}, "os"},
		{"truncated rfc3004 user class", []dhcpv4.Option{uc("\x09iPXE")}, Client{UserClass: `"\tiPXE"`}, "os"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Detect(request(t, tt.opts...))
			if got != tt.want {
				t.Errorf("Detect = %+v, want %+v", got, tt.want)
			}
			if f := got.Firmware(); f != tt.firmware {
				t.Errorf("Firmware() = %q, want %q", f, tt.firmware)
			}
		})
	}
	if got := Detect(nil); got != (Client{}) {
		t.Errorf("Detect(nil) = %+v, want zero", got)
	}
}

func TestPlanFor(t *testing.T) {
	base := PlanConfig{HTTPBase: "http://10.0.0.1:8080"}
	snp := base
	snp.EFIx64File = "snponly.efi"
	full := base
	full.EFIIA32File, full.EFIARM64File, full.BIOSFile = "ipxe-ia32.efi", "ipxe-arm64.efi", "ipxe.pxe"
	custom := base
	custom.ScriptURL = func(m net.HardwareAddr) string { return "http://x/boot?mac=" + m.String() }
	signed := full
	signed.Signed = func(m net.HardwareAddr) bool { return m.String() == mac.String() }
	unsigned := signed
	unsigned.Signed = func(net.HardwareAddr) bool { return false }
	signedARM := signed
	signedARM.SignedARM64 = true
	signedARMDisk := signedARM
	signedARMDisk.SignedARM64Disk = true
	// The machine's profile has an x86_64 kernel only.
	x86Only := signedARM
	x86Only.Boots = func(m net.HardwareAddr, cpu string) bool { return cpu == "x86_64" }

	tests := []struct {
		name    string
		c       Client
		cfg     PlanConfig
		want    Plan
		wantErr bool
	}{
		{"bios", Client{PXE: true, Arch: ArchBIOS}, base, Plan{ProtoTFTP, "undionly.kpxe", ""}, false},
		{"bios custom", Client{PXE: true, Arch: ArchBIOS}, full, Plan{ProtoTFTP, "ipxe.pxe", ""}, false},
		{"uefi x64", Client{PXE: true, Arch: ArchEFIx64}, base, Plan{ProtoTFTP, "ipxe.efi", ""}, false},
		{"uefi bc is x64", Client{PXE: true, Arch: ArchEFIBC}, base, Plan{ProtoTFTP, "ipxe.efi", ""}, false},
		{"uefi x64 snponly", Client{PXE: true, Arch: ArchEFIx64}, snp, Plan{ProtoTFTP, "snponly.efi", ""}, false},
		{"uefi ia32 unconfigured", Client{PXE: true, Arch: ArchEFIIA32}, base, Plan{}, true},
		{"uefi ia32", Client{PXE: true, Arch: ArchEFIIA32}, full, Plan{ProtoTFTP, "ipxe-ia32.efi", ""}, false},
		{"arm64", Client{PXE: true, Arch: ArchEFIARM64}, full, Plan{ProtoTFTP, "ipxe-arm64.efi", ""}, false},
		{"arm32 unsupported", Client{PXE: true, Arch: ArchEFIARM32}, full, Plan{}, true},
		{"unknown arch", Client{PXE: true, Arch: 25}, full, Plan{}, true},
		{"ipxe bios gets script", Client{PXE: true, IPXE: true, Arch: ArchBIOS}, base, Plan{ProtoHTTP, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56", ""}, false},
		{"ipxe uefi never gets ipxe.efi", Client{PXE: true, IPXE: true, Arch: ArchEFIx64}, snp, Plan{ProtoHTTP, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56", ""}, false},
		{"ipxe on unsupported arch still gets script", Client{IPXE: true, Arch: ArchEFIARM32}, base, Plan{ProtoHTTP, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56", ""}, false},
		{"ipxe custom script url", Client{IPXE: true}, custom, Plan{ProtoHTTP, "http://x/boot?mac=52:54:00:12:34:56", ""}, false},
		{"ipxe without http", Client{IPXE: true}, PlanConfig{}, Plan{}, true},
		{"http boot x64", Client{HTTPBoot: true, Arch: ArchEFIx64HTTP}, snp, Plan{ProtoHTTP, "http://10.0.0.1:8080/files/snponly.efi", "HTTPClient"}, false},
		{"http boot trailing slash", Client{HTTPBoot: true, Arch: ArchEFIx64HTTP}, PlanConfig{HTTPBase: "http://h/"}, Plan{ProtoHTTP, "http://h/files/ipxe.efi", "HTTPClient"}, false},
		{"http boot arm64 unconfigured", Client{HTTPBoot: true, Arch: ArchEFIARM64HTTP}, base, Plan{}, true},
		{"http boot without http", Client{HTTPBoot: true, Arch: ArchEFIx64HTTP}, PlanConfig{}, Plan{}, true},
		{"os", Client{}, base, Plan{}, true},
		{"signed uefi x64 gets shim", Client{PXE: true, Arch: ArchEFIx64}, signed, Plan{ProtoTFTP, "shimx64.efi", ""}, false},
		{"signed http boot gets shim", Client{HTTPBoot: true, Arch: ArchEFIx64HTTP}, signed, Plan{ProtoHTTP, "http://10.0.0.1:8080/files/shimx64.efi", "HTTPClient"}, false},
		{"signed bios still gets ipxe", Client{PXE: true, Arch: ArchBIOS}, signed, Plan{ProtoTFTP, "ipxe.pxe", ""}, false},
		{"signed ipxe still gets its script", Client{PXE: true, IPXE: true, Arch: ArchEFIx64}, signed, Plan{ProtoHTTP, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56", ""}, false},
		{"signed arm64 has no chain", Client{PXE: true, Arch: ArchEFIARM64}, signed, Plan{}, true},
		{"signed arm64 gets the arm64 shim", Client{PXE: true, HasArch: true, Arch: ArchEFIARM64}, signedARM, Plan{ProtoTFTP, "shimaa64.efi", ""}, false},
		{"signed arm64 http boot without a disk grub", Client{HTTPBoot: true, HasArch: true, Arch: ArchEFIARM64HTTP}, signedARM, Plan{}, true},
		{"signed arm64 http boot gets its disk image", Client{HTTPBoot: true, HasArch: true, Arch: ArchEFIARM64HTTP}, signedARMDisk, Plan{ProtoHTTP, "http://10.0.0.1:8080/grub/52-54-00-12-34-56/arm64/disk.img", "HTTPClient"}, false},
		{"signed arm64 pxe still gets the arm64 shim", Client{PXE: true, HasArch: true, Arch: ArchEFIARM64}, signedARMDisk, Plan{ProtoTFTP, "shimaa64.efi", ""}, false},
		{"arm64 http boot of an ipxe profile gets ipxe", Client{HTTPBoot: true, HasArch: true, Arch: ArchEFIARM64HTTP}, full, Plan{ProtoHTTP, "http://10.0.0.1:8080/files/ipxe-arm64.efi", "HTTPClient"}, false},
		{"arm64 on an x86_64-only profile", Client{PXE: true, HasArch: true, Arch: ArchEFIARM64}, x86Only, Plan{}, true},
		{"arm64 http boot on an x86_64-only profile", Client{HTTPBoot: true, HasArch: true, Arch: ArchEFIARM64HTTP}, x86Only, Plan{}, true},
		{"arm64 ipxe asks for the arm64 script", Client{IPXE: true, HasArch: true, Arch: ArchEFIARM64}, signedARM, Plan{ProtoHTTP, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56?arch=arm64", ""}, false},
		{"arm64 ipxe on an x86_64-only profile", Client{IPXE: true, HasArch: true, Arch: ArchEFIARM64}, x86Only, Plan{}, true},
		{"x64 on an x86_64-only profile", Client{PXE: true, HasArch: true, Arch: ArchEFIx64}, x86Only, Plan{ProtoTFTP, "shimx64.efi", ""}, false},
		{"another machine gets ipxe", Client{PXE: true, Arch: ArchEFIx64}, unsigned, Plan{ProtoTFTP, "ipxe.efi", ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanFor(tt.c, mac, tt.cfg)
			if tt.wantErr {
				if !errors.Is(err, ErrNoPlan) {
					t.Fatalf("PlanFor error = %v, want ErrNoPlan", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanFor: %v", err)
			}
			if got != tt.want {
				t.Errorf("PlanFor = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestPlanForWrongArchSaysWhy: the refusal names the machine's
// architecture and what to add to its profile.
func TestPlanForWrongArchSaysWhy(t *testing.T) {
	cfg := PlanConfig{HTTPBase: "http://h", Boots: func(net.HardwareAddr, string) bool { return false }}
	_, err := PlanFor(Client{PXE: true, HasArch: true, Arch: ArchEFIARM64}, mac, cfg)
	if err == nil || !strings.Contains(err.Error(), "uefi-arm64") || !strings.Contains(err.Error(), "no arm64 kernel") {
		t.Fatalf("PlanFor = %v, want an error naming uefi-arm64 and the missing arm64 kernel", err)
	}
	for a, cpu := range map[Arch]string{ArchEFIx64: "x86_64", ArchEFIIA32: "x86_64", ArchBIOS: "x86_64", ArchEFIARM64HTTP: "arm64", ArchEFIARM32: ""} {
		if got := a.CPU(); got != cpu {
			t.Errorf("%s.CPU() = %q, want %q", a, got, cpu)
		}
	}
}

func TestArchString(t *testing.T) {
	if s := Arch(7).String(); s != "uefi-x64" {
		t.Errorf("got %q", s)
	}
	if s := Arch(42).String(); s != "arch-42" {
		t.Errorf("got %q", s)
	}
}

func TestClientPath(t *testing.T) {
	for _, tt := range []struct {
		c    Client
		want string
	}{
		{Client{}, ""},
		{Client{PXE: true, Arch: ArchBIOS}, PathPXEv4},
		{Client{PXE: true, Arch: ArchEFIx64}, PathPXEv4},
		{Client{HTTPBoot: true, Arch: ArchEFIx64HTTP}, PathHTTPv4},
		// iPXE loaded by HTTP boot still says PXEClient or HTTPClient;
		// its user class decides.
		{Client{HTTPBoot: true, IPXE: true, Arch: ArchEFIx64HTTP}, PathIPXE},
		{Client{PXE: true, IPXE: true, Arch: ArchEFIx64}, PathIPXE},
	} {
		if got := tt.c.Path(); got != tt.want {
			t.Errorf("%+v.Path() = %q, want %q", tt.c, got, tt.want)
		}
	}
}

func TestDetect6(t *testing.T) {
	pxe6 := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeSolicit}
	pxe6.AddOption(dhcpv6.OptClientArchType(iana.EFI_X86_64))
	pxe6.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("PXEClient:Arch:00007:UNDI:003000")}})
	http6 := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeSolicit}
	http6.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("HTTPClient:Arch:00016:UNDI:003000")}})
	ipxe6 := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeSolicit}
	ipxe6.AddOption(dhcpv6.OptClientArchType(iana.EFI_X86_64))
	ipxe6.AddOption(&dhcpv6.OptUserClass{UserClasses: [][]byte{[]byte("iPXE")}})
	for _, tt := range []struct {
		m              *dhcpv6.Message
		firmware, path string
	}{
		{pxe6, "uefi-x64-v6", PathPXEv6},
		{http6, "uefi-x64-http-v6", PathHTTPv6}, // arch from the vendor class
		{ipxe6, "ipxe-uefi-x64-v6", PathIPXE},
		{&dhcpv6.Message{}, "os", ""},
		{nil, "os", ""},
	} {
		c := Detect6(tt.m)
		if c.Firmware() != tt.firmware || c.Path() != tt.path {
			t.Errorf("Detect6 = %+v: firmware %q path %q, want %q %q", c, c.Firmware(), c.Path(), tt.firmware, tt.path)
		}
	}
}
