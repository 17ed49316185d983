package inventorysvc

import (
	"errors"
	"net"
	"reflect"
	"testing"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// TestProfileFromConfig: a profile of the file becomes the inventory's
// profile, owned by the config with the inventory's defaults, and a
// profile the inventory's rules refuse is refused with the file's key.
func TestProfileFromConfig(t *testing.T) {
	src := inventory.SourceConfig
	tests := []struct {
		name string
		cp   config.Profile
		want inventory.Profile
		key  string // the key the error names; "" for no error
	}{
		{name: "kernel and initrds", cp: config.Profile{Kernel: "/k", Initrd: []string{"/i1", "/i2"}, Cmdline: "console=ttyS0"},
			want: inventory.Profile{Name: "p", Kernel: "/k", Initrd: []string{"/i1", "/i2"}, Cmdline: "console=ttyS0", Source: src}},
		{name: "root gets the ephemeral overlay", cp: config.Profile{Kernel: "/k", Root: config.Root{Image: "debian"}},
			want: inventory.Profile{Name: "p", Kernel: "/k", Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayEphemeral}, Source: src}},
		{name: "kernel of the image", cp: config.Profile{Cmdline: "quiet", Root: config.Root{Image: "debian", Overlay: "persistent", Kernel: "image"}},
			want: inventory.Profile{Name: "p", Cmdline: "quiet", Source: src,
				Root: inventory.Root{Image: "debian", Overlay: inventory.OverlayPersistent, Kernel: inventory.RootKernelImage}}},
		{name: "grub", cp: config.Profile{Kernel: "/k", Loader: "grub"},
			want: inventory.Profile{Name: "p", Kernel: "/k", Loader: inventory.LoaderGrub, Source: src}},
		{name: "client-disk with its cache", cp: config.Profile{Kernel: "/k", Cmdline: "bootfleet.cache=/dev/vda", Root: config.Root{Image: "d", Overlay: "client-disk"}},
			want: inventory.Profile{Name: "p", Kernel: "/k", Cmdline: "bootfleet.cache=/dev/vda", Source: src,
				Root: inventory.Root{Image: "d", Overlay: inventory.OverlayClientDisk}}},
		{name: "client-disk without a cache", cp: config.Profile{Kernel: "/k", Cmdline: "quiet", Root: config.Root{Image: "d", Overlay: "client-disk"}},
			key: "profiles.p.root.overlay"},
		{name: "unknown overlay", cp: config.Profile{Kernel: "/k", Root: config.Root{Image: "d", Overlay: "tmpfs"}},
			key: "profiles.p.root.overlay"},
		{name: "overlay without an image", cp: config.Profile{Kernel: "/k", Root: config.Root{Overlay: "persistent"}},
			key: "profiles.p.root.image"},
		{name: "kernel of an image without one", cp: config.Profile{Root: config.Root{Kernel: "image"}},
			key: "profiles.p.root.image"},
		{name: "kernel of the image and a kernel", cp: config.Profile{Kernel: "/k", Root: config.Root{Image: "d", Kernel: "image"}},
			key: "profiles.p.kernel"},
		{name: "unknown root kernel", cp: config.Profile{Kernel: "/k", Root: config.Root{Image: "d", Kernel: "vmlinuz"}},
			key: "profiles.p.root.kernel"},
		{name: "x86_64 and arm64", cp: config.Profile{Kernel: "/k", ARM64: config.ArchFiles{Kernel: "/a/k", Initrd: []string{"/a/i"}}, Loader: "grub"},
			want: inventory.Profile{Name: "p", Kernel: "/k", ARM64: inventory.ArchBoot{Kernel: "/a/k", Initrd: []string{"/a/i"}}, Loader: inventory.LoaderGrub, Source: src}},
		{name: "arm64 only", cp: config.Profile{ARM64: config.ArchFiles{Kernel: "/a/k"}},
			want: inventory.Profile{Name: "p", ARM64: inventory.ArchBoot{Kernel: "/a/k"}, Source: src}},
		{name: "arm64 initrd without its kernel", cp: config.Profile{Kernel: "/k", ARM64: config.ArchFiles{Initrd: []string{"/a/i"}}},
			key: "profiles.p.arm64.initrd"},
		{name: "no kernel", cp: config.Profile{Cmdline: "quiet"}, key: "profiles.p.kernel"},
		{name: "unknown loader", cp: config.Profile{Kernel: "/k", Loader: "syslinux"}, key: "profiles.p.loader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := profileFromConfig("p", tt.cp)
			if tt.key == "" {
				if err != nil {
					t.Fatalf("got error %v, want %+v", err, tt.want)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			var ie *inventory.Error
			if !errors.As(err, &ie) || ie.Field != tt.key || !errors.Is(err, inventory.ErrInvalid) {
				t.Fatalf("got %+v, %v; want an invalid error about %s", got, err, tt.key)
			}
		})
	}
}

func TestMachineFromConfig(t *testing.T) {
	tests := []struct {
		name string
		cm   config.Machine
		want inventory.Machine
		err  bool
	}{
		{name: "reserved", cm: config.Machine{MAC: "52-54-00-00-00-01", Name: "pc1", Profile: "linux", IP: "10.0.0.50"},
			want: inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1", Profile: "linux", IP: net.IPv4(10, 0, 0, 50).To4(), Source: inventory.SourceConfig}},
		{name: "no reservation", cm: config.Machine{MAC: "52:54:00:00:00:02"},
			want: inventory.Machine{MAC: mac("52:54:00:00:00:02"), Source: inventory.SourceConfig}},
		{name: "own root channel", cm: config.Machine{MAC: "52:54:00:00:00:04", Profile: "lab", RootChannel: "3"},
			want: inventory.Machine{MAC: mac("52:54:00:00:00:04"), Profile: "lab", Channel: "3", Source: inventory.SourceConfig}},
		{name: "bad MAC", cm: config.Machine{MAC: "52:54:00"}, err: true},
		{name: "IPv6 reservation", cm: config.Machine{MAC: "52:54:00:00:00:03", IP: "fd00::1"}, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := machineFromConfig(tt.cm)
			if tt.err {
				if !errors.Is(err, inventory.ErrInvalid) {
					t.Fatalf("got %+v, %v; want an invalid error", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestPolicyFromConfig: discovery_profile and discovery say what machines
// nobody enrolled boot; default_profile boots enrolled ones without one.
func TestPolicyFromConfig(t *testing.T) {
	tests := []struct {
		name string
		c    config.Config
		want machineview.Input
	}{
		{"default boots everyone", config.Config{DefaultProfile: "linux", Discovery: "boot"},
			machineview.Input{DefaultProfile: "linux", UnknownProfile: "linux"}},
		{"discovery profile", config.Config{DefaultProfile: "linux", DiscoveryProfile: "rescue", Discovery: "boot"},
			machineview.Input{DefaultProfile: "linux", UnknownProfile: "rescue"}},
		{"ignore", config.Config{DefaultProfile: "linux", DiscoveryProfile: "rescue", Discovery: "ignore"},
			machineview.Input{DefaultProfile: "linux"}},
		{"nothing", config.Config{Discovery: "boot"}, machineview.Input{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policyFromConfig(&tt.c); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
