package ipxe

import (
	"os"
	"path/filepath"
	"testing"
)

var update = os.Getenv("UPDATE_TESTDATA") != ""

func TestRenderCmdline(t *testing.T) {
	v := Vars{MAC: "52:54:00:12:34:56", Name: "pc1", Profile: "linux", DoneURL: "http://10.0.0.1:8080/done/52-54-00-12-34-56"}
	tests := []struct {
		name, tmpl, want string
		wantErr          bool
	}{
		{"plain", "console=ttyS0", "console=ttyS0", false},
		{"done url", "console=ttyS0 done={{ .DoneURL }}", "console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-12-34-56", false},
		{"name and mac", "host={{.Name}} mac={{.MAC}}", "host=pc1 mac=52:54:00:12:34:56", false},
		{"unknown field", "x={{ .Nope }}", "", true},
		{"broken template", "x={{ .DoneURL ", "", true},
		{"newline refused", "a\nb", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderCmdline(tt.tmpl, v)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestScriptGolden(t *testing.T) {
	tests := []struct {
		name string
		boot Boot
	}{
		{"one-initrd", Boot{
			Kernel:  "http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-12-34-56",
			Initrds: []Initrd{{URL: "http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-12-34-56"}},
			Cmdline: "console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-12-34-56",
		}},
		{"duplicate-names", Boot{
			Kernel:  "http://mirror/vmlinuz",
			Initrds: []Initrd{{URL: "http://a/initrd.img"}, {URL: "http://b/initrd.img"}, {URL: "http://c/we ird$name"}},
		}},
		{"no-initrd", Boot{Kernel: "http://mirror/vmlinuz", Cmdline: "quiet"}},
		{"fallbacks", Boot{
			Kernel:    "http://10.0.0.2:8080/images/ab/vmlinuz?mac=52-54-00-12-34-56",
			KernelAlt: []string{"http://10.0.0.1:8080/images/ab/vmlinuz?mac=52-54-00-12-34-56", "http://10.0.0.3:8080/images/ab/vmlinuz?mac=52-54-00-12-34-56"},
			Initrds: []Initrd{{URL: "http://10.0.0.2:8080/images/ab/initrd.img?mac=52-54-00-12-34-56", Name: "initrd.img",
				Alt: []string{"http://10.0.0.1:8080/images/ab/initrd.img?mac=52-54-00-12-34-56"}}},
			Cmdline: "console=ttyS0 bootfleet.root=nbd:10.0.0.2:10809:x",
		}},
		// Multicast TFTP first; any failure of it falls to HTTP.
		{"tftm-fallback", Boot{
			Kernel:    "tftm://10.0.0.1/profiles/linux/kernel",
			KernelAlt: []string{"http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-12-34-56"},
			Initrds: []Initrd{{URL: "tftm://10.0.0.1/profiles/linux/initrd/0/initrd.img", Name: "initrd.img",
				Alt: []string{"http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-12-34-56"}}},
			Cmdline: "console=ttyS0",
		}},
		// UEFI takes the UKI by MTFTP, without initrd=; BIOS, and UEFI
		// when the UKI fails, the kernel and initrd by HTTP.
		{"uki", Boot{
			UKI:     "mtftp://10.0.0.1/profiles/linux/boot.efi",
			Kernel:  "http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-12-34-56",
			Initrds: []Initrd{{URL: "http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-12-34-56", Name: "initrd.img"}},
			Cmdline: "console=ttyS0 initrd=x.img bootfleet.root=nbd:10.0.0.1:10809:x",
		}},
		{"uki-no-cmdline", Boot{UKI: "mtftp://10.0.0.1/images/ab/boot.efi", Kernel: "http://10.0.0.1:8080/images/ab/vmlinuz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Script(tt.boot)
			golden := filepath.Join("testdata", tt.name+".ipxe")
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create)", err)
			}
			if got != string(want) {
				t.Fatalf("script differs from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}
