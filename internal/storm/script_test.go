package storm

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/ipxe"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestParseScript(t *testing.T) {
	base := "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56"
	vars := map[string]string{"mac": "52:54:00:12:34:56", "ip": "10.0.0.100", "next-server": "10.0.0.1"}
	tests := []struct {
		name    string
		script  string
		want    Script
		wantErr error
	}{
		{"kernel, initrd, boot",
			"#!ipxe\nkernel http://s/vmlinuz console=ttyS0\ninitrd http://s/initrd.img\nboot\n",
			Script{Kernel: Image{Name: "vmlinuz", URL: "http://s/vmlinuz", Args: "console=ttyS0"},
				Initrds: []Image{{Name: "initrd.img", URL: "http://s/initrd.img"}}}, nil},
		{"relative URLs resolve against the script",
			"#!ipxe\nkernel /k/vmlinuz\nmodule rd.img\nboot",
			Script{Kernel: Image{Name: "vmlinuz", URL: "http://10.0.0.1:8080/k/vmlinuz"},
				Initrds: []Image{{Name: "rd.img", URL: "http://10.0.0.1:8080/ipxe/rd.img"}}}, nil},
		{"variables and set",
			"#!ipxe\nset base http://${next-server}/b\nkernel ${base}/vmlinuz ip=${ip} mac=${mac:hexhyp} raw=${mac:hexraw} none=${nope}\nboot",
			Script{Kernel: Image{Name: "vmlinuz", URL: "http://10.0.0.1/b/vmlinuz",
				Args: "ip=10.0.0.100 mac=52-54-00-12-34-56 raw=525400123456 none="}}, nil},
		{"imgargs replaces the command line, --name names",
			"#!ipxe\nkernel --name k --autofree http://s/vmlinuz old\nimgargs k new args\ninitrd -n rd http://s/x.img\nboot k",
			Script{Kernel: Image{Name: "k", URL: "http://s/vmlinuz", Args: "new args"},
				Initrds: []Image{{Name: "rd", URL: "http://s/x.img"}}}, nil},
		{"|| goto is not taken when the command succeeds",
			"#!ipxe\n:start\nkernel http://s/k || goto failed\nboot || goto failed\n:failed\nexit",
			Script{Kernel: Image{Name: "k", URL: "http://s/k"}}, nil},
		{"goto skips lines",
			"#!ipxe\ngoto real\nkernel http://s/wrong\n:real\nkernel http://s/right\nboot",
			Script{Kernel: Image{Name: "right", URL: "http://s/right"}}, nil},
		{"an unknown command fails into ||",
			"#!ipxe\nfrobnicate || goto fallback\nexit\n:fallback\nkernel http://s/k\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://s/k"}}, nil},
		{"iseq and &&",
			"#!ipxe\niseq ${ip} 10.0.0.100 && goto match\nexit\n:match\nkernel http://s/k\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://s/k"}}, nil},
		{"chain ends the script",
			"#!ipxe\necho hello\nchain --replace http://s/next.ipxe\nkernel http://s/never\n",
			Script{Chain: "http://s/next.ipxe"}, nil},
		{"quoted argument keeps its blank",
			"#!ipxe\nkernel http://s/k \"a b\"\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://s/k", Args: "a b"}}, nil},
		{"|| kernel keeps the fallbacks in order",
			"#!ipxe\nkernel mtftp://10.0.0.1/k a=1 || kernel http://s/k a=2 || kernel /k2 || goto failed\nboot\n:failed\nexit",
			Script{Kernel: Image{Name: "k", URL: "mtftp://10.0.0.1/k", Args: "a=1", Alt: []Image{
				{Name: "k", URL: "http://s/k", Args: "a=2"}, {Name: "k2", URL: "http://10.0.0.1:8080/k2"}}}}, nil},
		{"|| initrd keeps them per initrd, module is an initrd",
			"#!ipxe\nkernel http://s/k\ninitrd -n a http://x/a || module -n a http://y/a\ninitrd http://x/b || goto failed\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://s/k"}, Initrds: []Image{
				{Name: "a", URL: "http://x/a", Alt: []Image{{Name: "a", URL: "http://y/a"}}},
				{Name: "b", URL: "http://x/b"}}}, nil},
		{"a command of another kind ends the fallbacks",
			"#!ipxe\nkernel http://s/k || initrd http://s/i || kernel http://s/never\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://s/k"}}, nil},
		{"&& after the image is no fallback",
			"#!ipxe\nkernel http://s/k && kernel http://s/k2 || kernel http://s/k3\nboot",
			Script{Kernel: Image{Name: "k2", URL: "http://s/k2", Alt: []Image{{Name: "k3", URL: "http://s/k3"}}}}, nil},
		{"imgargs reaches the fallback of the same name",
			"#!ipxe\nkernel -n k http://a/k old || kernel -n k http://b/k old\nimgargs k new\nboot",
			Script{Kernel: Image{Name: "k", URL: "http://a/k", Args: "new", Alt: []Image{{Name: "k", URL: "http://b/k", Args: "new"}}}}, nil},
		{"not a script", "kernel http://s/k\n", Script{}, ErrNotIPXE},
		{"no boot", "#!ipxe\nkernel http://s/k\n", Script{}, ErrNoBoot},
		{"exit", "#!ipxe\nexit\n", Script{}, ErrScriptOp},
		{"goto nowhere", "#!ipxe\ngoto nowhere\n", Script{}, ErrScriptOp},
		{"boot without kernel loops on its retry", "#!ipxe\n:a\nboot || goto a\n", Script{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseScript(tt.script, mustURL(t, base), vars)
			if tt.name == "boot without kernel loops on its retry" {
				if err == nil || !strings.Contains(err.Error(), "steps") {
					t.Fatalf("err = %v, want the step bound", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestParseRenderedScripts runs the parser on what bootfleet renders: the
// golden scripts of internal/ipxe, and a fresh render with a diskless root.
func TestParseRenderedScripts(t *testing.T) {
	golden := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "ipxe", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	efi := map[string]string{"platform": "efi"}
	tests := []struct {
		name   string
		script string
		vars   map[string]string
		want   Script
	}{
		// A UEFI iPXE takes the UKI alone, without initrd=; BIOS skips to
		// the plain lines.
		{"uki.ipxe on efi", golden("uki.ipxe"), efi, Script{
			Kernel: Image{Name: "boot.efi", URL: "mtftp://10.0.0.1/profiles/linux/boot.efi", Args: "console=ttyS0 bootfleet.root=nbd:10.0.0.1:10809:x"}}},
		{"uki.ipxe on bios", golden("uki.ipxe"), map[string]string{"platform": "pcbios"}, Script{
			Kernel: Image{Name: "kernel", URL: "http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-12-34-56",
				Args: "initrd=initrd.img console=ttyS0 initrd=x.img bootfleet.root=nbd:10.0.0.1:10809:x"},
			Initrds: []Image{{Name: "initrd.img", URL: "http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-12-34-56"}}}},
		{"one-initrd.ipxe", golden("one-initrd.ipxe"), nil, Script{
			Kernel: Image{Name: "kernel", URL: "http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-12-34-56",
				Args: "initrd=initrd.img console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-12-34-56"},
			Initrds: []Image{{Name: "initrd.img", URL: "http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-12-34-56"}}}},
		{"no-initrd.ipxe", golden("no-initrd.ipxe"), nil, Script{
			Kernel: Image{Name: "vmlinuz", URL: "http://mirror/vmlinuz", Args: "quiet"}}},
		// The third URL has a blank that bootfleet does not quote: iPXE,
		// and so this parser, take "ird$name" as an argument.
		{"duplicate-names.ipxe", golden("duplicate-names.ipxe"), nil, Script{
			Kernel: Image{Name: "vmlinuz", URL: "http://mirror/vmlinuz", Args: "initrd=initrd.img initrd=1-initrd.img initrd=we_ird_name"},
			Initrds: []Image{
				{Name: "initrd.img", URL: "http://a/initrd.img"},
				{Name: "1-initrd.img", URL: "http://b/initrd.img"},
				{Name: "we_ird_name", URL: "http://c/we", Args: "ird$name"}}}},
		{"rendered with a root", ipxe.Script(ipxe.Boot{
			Kernel:  "http://10.0.0.1:8080/profiles/lab/kernel?mac=52-54-00-00-00-01",
			Initrds: []ipxe.Initrd{{URL: "http://10.0.0.1:8080/profiles/lab/initrd/0/bootfleet-initrd.img?mac=52-54-00-00-00-01"}},
			Cmdline: "console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-00-00-01 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-00-00-01-s3cret",
		}), nil, Script{
			Kernel: Image{Name: "kernel", URL: "http://10.0.0.1:8080/profiles/lab/kernel?mac=52-54-00-00-00-01",
				Args: "initrd=bootfleet-initrd.img console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-00-00-01 bootfleet.root=nbd:10.0.0.1:10809:m-52-54-00-00-00-01-s3cret"},
			Initrds: []Image{{Name: "bootfleet-initrd.img", URL: "http://10.0.0.1:8080/profiles/lab/initrd/0/bootfleet-initrd.img?mac=52-54-00-00-00-01"}}}},
		{"rendered with fallbacks", ipxe.Script(ipxe.Boot{
			Kernel:    "mtftp://10.0.0.1/profiles/lab/kernel",
			KernelAlt: []string{"http://10.0.0.1:8080/profiles/lab/kernel"},
			Initrds:   []ipxe.Initrd{{URL: "http://10.0.0.1:8080/rd.img", Alt: []string{"http://10.0.0.2:8080/rd.img"}}},
			Cmdline:   "quiet",
		}), nil, Script{
			Kernel: Image{Name: "kernel", URL: "mtftp://10.0.0.1/profiles/lab/kernel", Args: "initrd=rd.img quiet",
				Alt: []Image{{Name: "kernel", URL: "http://10.0.0.1:8080/profiles/lab/kernel", Args: "initrd=rd.img quiet"}}},
			Initrds: []Image{{Name: "rd.img", URL: "http://10.0.0.1:8080/rd.img",
				Alt: []Image{{Name: "rd.img", URL: "http://10.0.0.2:8080/rd.img"}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseScript(tt.script, mustURL(t, "http://10.0.0.1:8080/ipxe/52-54-00-12-34-56"), tt.vars)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseScript(f *testing.F) {
	for _, name := range []string{"one-initrd.ipxe", "no-initrd.ipxe", "duplicate-names.ipxe", "uki.ipxe"} {
		b, err := os.ReadFile(filepath.Join("..", "ipxe", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	base, _ := url.Parse("http://10.0.0.1:8080/ipxe/x")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseScript(s, base, map[string]string{"mac": "02:00:00:00:00:01"})
		if err != nil {
			return
		}
		if got.Chain == "" && got.Kernel.URL == "" {
			t.Fatalf("a script that boots must name a kernel or a chain: %+v", got)
		}
	})
}
