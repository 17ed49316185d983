package nbd

import (
	"strings"
	"testing"
)

// terse builds a fio terse v3 line with the given error, read IOPS and
// write IOPS in their fields and zeros elsewhere.
func terse(errno, readIOPS, writeIOPS string) string {
	f := make([]string, 130)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[1], f[2] = "3", "fio-3.33", "rr"
	f[terseError-1], f[terseReadIOPS-1], f[terseWriteIOPS-1] = errno, readIOPS, writeIOPS
	return strings.Join(f, ";")
}

// check wants an error containing wantError when that is set, else got
// equal to want and no error.
func check[T comparable](t *testing.T, got T, err error, want T, wantError string) {
	t.Helper()
	if wantError != "" {
		if err == nil || !strings.Contains(err.Error(), wantError) {
			t.Fatalf("got %v, %v; want an error containing %q", got, err, wantError)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

func TestParseTerse(t *testing.T) {
	for _, tc := range []struct {
		name      string
		out       string
		write     bool
		want      float64
		wantError string
	}{
		{"read", terse("0", "41577", "0") + "\n", false, 41577, ""},
		{"write", terse("0", "0", "62375"), true, 62375, ""},
		{"notes before the line", "fio: note: both iodepth >= 1 and synchronous I/O engine are selected\n" + terse("0", "263760", "0"), false, 263760, ""},
		{"job error", terse("5", "100", "0"), false, 0, "error 5"},
		{"moved nothing", terse("0", "0", "0"), true, 0, "0 IOPS"},
		{"write asked, read measured", terse("0", "100", "0"), true, 0, "0 IOPS"},
		{"no terse line", "fio: failed to connect\n", false, 0, "no terse job line"},
		{"truncated", "3;fio-3.33;rr;0;0;1;2;3", false, 0, "fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := parseTerse(tc.out)
			var got float64
			if err == nil {
				got, err = r.iops(tc.write)
			}
			check(t, got, err, tc.want, tc.wantError)
		})
	}
}

func TestExportURI(t *testing.T) {
	for _, tc := range []struct {
		name, script, want, wantError string
	}{
		{"kernel line", "#!ipxe\nkernel http://127.0.0.1:8080/files/vmlinuz initrd=initrd.img bootfleet.root=nbd:127.0.0.1:10809:m-52-54-00-bf-00-01-9937 console=ttyS0\nboot\n",
			"nbd://127.0.0.1:10809/m-52-54-00-bf-00-01-9937", ""},
		{"last word", "kernel vmlinuz bootfleet.root=nbd:10.0.0.1:10819:m-x", "nbd://10.0.0.1:10819/m-x", ""},
		{"no root", "#!ipxe\nkernel vmlinuz\nboot\n", "", "no bootfleet.root=nbd:"},
		{"no export", "kernel vmlinuz bootfleet.root=nbd:127.0.0.1:10809", "", "HOST:PORT:EXPORT"},
		{"other root ignored", "kernel vmlinuz bootfleet.root.part=2", "", "no bootfleet.root=nbd:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := exportURI(tc.script)
			check(t, got, err, tc.want, tc.wantError)
		})
	}
}

// nbdinfoOut is nbdinfo 1.14's output for qemu-nbd's export, shortened.
const nbdinfoOut = `protocol: newstyle-fixed without TLS, using structured packets
export="disk":
	export-size: 536870912 (512M)
	uri: nbd://127.0.0.1:10811/disk
	contexts:
		base:allocation
	is_rotational: false
	is_read_only: true
	can_cache: true
	can_df: true
	can_fast_zero: false
	can_flush: false
	can_fua: false
	can_multi_conn: true
	can_trim: false
	can_zero: false
	block_size_minimum: 1
`

func TestNbdinfo(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"offered", nbdinfoOut, "true"},
		{"not offered", strings.Replace(nbdinfoOut, "can_multi_conn: true", "can_multi_conn: false", 1), "false"},
		{"missing", "protocol: oldstyle\n", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := multiConn(tc.out); got != tc.want {
				t.Errorf("multiConn = %q, want %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		out  string
		want int64
		ok   bool
	}{{"536870912\n", 536870912, true}, {"134217728", 134217728, true}, {"nbdinfo: nbd_connect_uri: Connection refused\n", 0, false}, {"", 0, false}} {
		t.Run("size "+tc.out, func(t *testing.T) {
			got, err := parseSize(tc.out)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d (ok %v)", tc.out, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestParseDFAndSectors(t *testing.T) {
	dev, fstype, err := parseDF("Filesystem     Type\n/dev/vda       ext4\n")
	if err != nil || dev != "vda" || fstype != "ext4" {
		t.Errorf("parseDF = %q, %q, %v; want vda, ext4", dev, fstype, err)
	}
	if _, _, err := parseDF("Filesystem Type\n"); err == nil {
		t.Error("parseDF without a line: want an error")
	}
	n, err := sectorsRead("  123  4 5678 90 1 2 3 4 0 5 6\n")
	if err != nil || n != 5678 {
		t.Errorf("sectorsRead = %d, %v; want 5678 (the third field)", n, err)
	}
}

func TestParseVariant(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want variant
		ok   bool
	}{
		{"head=/tmp/head/bootfleet", variant{name: "head", bin: "/tmp/head/bootfleet"}, true},
		{"new=bin/bootfleet,GODEBUG=madvdontneed=1,X=", variant{name: "new", bin: "bin/bootfleet", env: []string{"GODEBUG=madvdontneed=1", "X="}}, true},
		{"bin/bootfleet", variant{}, false},
		{"new=", variant{}, false},
		{"new=bin/bootfleet,NOVALUE", variant{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseVariant(tc.in)
			if (err == nil) != tc.ok || got.name != tc.want.name || got.bin != tc.want.bin || strings.Join(got.env, " ") != strings.Join(tc.want.env, " ") {
				t.Errorf("parseVariant(%q) = %+v, %v; want %+v (ok %v)", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}
