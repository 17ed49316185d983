package initramfs

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseNICDrivers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"unset", nil, DefaultNICDrivers, ""},
		{"empty", []string{""}, DefaultNICDrivers, ""},
		{"default", []string{"default"}, DefaultNICDrivers, ""},
		{"default plus", []string{"default", "ice", "mlx5-core"}, append(slices.Clone(DefaultNICDrivers), "ice", "mlx5_core"), ""},
		{"own list", []string{"e1000e", " IGB ", "e1000e"}, []string{"e1000e", "igb"}, ""},
		{"none", []string{"none"}, []string{}, ""},
		{"none with names", []string{"none", "igb"}, nil, "none alone"},
		{"bad name", []string{"igb;rm"}, nil, "kernel module name"},
		{"path", []string{"../igb"}, nil, "kernel module name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNICDrivers(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseNICDrivers(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) || got == nil {
				t.Errorf("ParseNICDrivers(%q) = %#v, %v; want %#v", tc.in, got, err, tc.want)
			}
		})
	}
}

// fakeELF is a little-endian ELF64 relocatable object of this machine's
// architecture, with a .modinfo section holding modinfo when it is not
// nil: enough for OpenTree, Resolve, sameArch and readStatic.
func fakeELF(modinfo []string) []byte {
	m := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if m == 0 {
		m = elf.EM_X86_64
	}
	h := elfHeader(m)
	if modinfo == nil {
		return h
	}
	info := []byte(strings.Join(modinfo, "\x00") + "\x00")
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	b := append(append(append([]byte(nil), h...), info...), shstr...)
	shoff := len(b)
	sh := func(name, typ uint32, off, size int) {
		s := make([]byte, 64)
		binary.LittleEndian.PutUint32(s[0:], name)
		binary.LittleEndian.PutUint32(s[4:], typ)
		binary.LittleEndian.PutUint64(s[24:], uint64(off))
		binary.LittleEndian.PutUint64(s[32:], uint64(size))
		binary.LittleEndian.PutUint64(s[48:], 1)
		b = append(b, s...)
	}
	sh(0, 0, 0, 0)
	sh(1, uint32(elf.SHT_PROGBITS), 64, len(info))
	sh(10, uint32(elf.SHT_STRTAB), 64+len(info), len(shstr))
	binary.LittleEndian.PutUint64(b[40:], uint64(shoff)) // e_shoff
	binary.LittleEndian.PutUint16(b[58:], 64)            // e_shentsize
	binary.LittleEndian.PutUint16(b[60:], 3)             // e_shnum
	binary.LittleEndian.PutUint16(b[62:], 2)             // e_shstrndx
	return b
}

// fakeKernel writes a lib/modules/VERSION tree of fake modules: the base
// ones, two NIC drivers with dependencies, and one whose dependency is
// missing. It returns the tree and a static "program" for agent and
// busybox.
func fakeKernel(t *testing.T) (dir, prog string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "6.1.0-test-amd64")
	mods := map[string][]string{
		"virtio_pci":   {"depends="},
		"virtio_ring":  {"depends="},
		"virtio_net":   {"depends=virtio_ring"},
		"nbd":          {"depends="},
		"ext4":         {"depends="},
		"e1000e":       {"depends="},
		"igb":          {"depends=dca,i2c-algo-bit"},
		"dca":          {"depends="},
		"i2c-algo-bit": {"depends="},
		"broken_nic":   {"depends=no_such_dep"},
	}
	for name, info := range mods {
		p := filepath.Join(dir, "kernel/drivers/net", name+".ko")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fakeELF(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prog = filepath.Join(root, "prog")
	if err := os.WriteFile(prog, fakeELF(nil), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, prog
}

// readCPIO returns the regular files of a newc archive by name.
func readCPIO(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for len(b) >= 110 {
		field := func(i int) int {
			v, err := strconv.ParseUint(string(b[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				t.Fatalf("cpio header field %d: %v", i, err)
			}
			return int(v)
		}
		mode, size, namesize := field(1), field(6), field(11)
		name := string(b[110 : 110+namesize-1])
		off := 110 + namesize
		off += pad4(off)
		if name == trailerName {
			return files
		}
		if mode&0o170000 == modeRegular {
			files[name] = b[off : off+size]
		}
		off += size
		b = b[off+pad4(off):]
	}
	t.Fatal("cpio archive has no trailer")
	return nil
}

func decompress(t *testing.T, kind string, b []byte) []byte {
	t.Helper()
	switch kind {
	case CompressGzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case CompressXZ:
		if !bytes.HasPrefix(b, []byte("\xfd7zXZ\x00")) {
			t.Fatalf("xz output starts %q, want the xz magic", b[:6])
		}
		cmd := exec.Command("xz", "-dc")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("xz -dc: %v", err)
		}
		return out
	}
	t.Fatalf("unknown compression %q", kind)
	return nil
}

// TestBuildNICDrivers builds from a fake kernel: the drivers asked for go
// in with their dependencies before them, one the kernel lacks or whose
// dependency it lacks is left out with a warning, and the archive
// unpacks from both compressions to the same files, reproducibly.
func TestBuildNICDrivers(t *testing.T) {
	dir, prog := fakeKernel(t)
	for _, tc := range []struct {
		name        string
		nics        []string
		compression string
		wantNICs    []string
		wantOrder   []string // a subsequence of /etc/modules
		absent      []string
		wantWarn    []string
	}{
		{"present with deps", []string{"igb", "e1000e"}, CompressXZ, []string{"igb", "e1000e"},
			[]string{"virtio_pci", "nbd", "ext4", "dca", "i2c_algo_bit", "igb", "e1000e"}, []string{"virtio_net"}, nil},
		{"absent", []string{"e1000e", "ice"}, CompressGzip, []string{"e1000e"},
			[]string{"ext4", "e1000e"}, []string{"ice", "igb"}, []string{"module=ice"}},
		{"missing dependency", []string{"broken_nic", "virtio_net"}, CompressXZ, []string{"virtio_net"},
			[]string{"virtio_ring", "virtio_net"}, []string{"broken_nic", "no_such_dep"}, []string{"module=broken_nic", "no_such_dep"}},
		{"none", []string{}, CompressGzip, nil, []string{"nbd", "ext4"}, []string{"virtio_net", "e1000e", "igb"}, nil},
		{"default", nil, CompressXZ, []string{"virtio_net", "e1000e", "igb"}, []string{"virtio_net", "e1000e", "igb"}, nil, []string{"module=vmxnet3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			o := Options{ModulesDir: dir, Agent: prog, Busybox: prog, NICDrivers: tc.nics, Compression: tc.compression,
				Log: slog.New(slog.NewTextHandler(&logs, nil))}
			var out bytes.Buffer
			res, err := Build(&out, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Compression != tc.compression {
				t.Errorf("Compression = %q, want %q", res.Compression, tc.compression)
			}
			if !reflect.DeepEqual(res.NICDrivers, tc.wantNICs) {
				t.Errorf("NICDrivers = %q, want %q", res.NICDrivers, tc.wantNICs)
			}
			files := readCPIO(t, decompress(t, tc.compression, out.Bytes()))
			order := strings.Fields(string(files["etc/modules"]))
			if !reflect.DeepEqual(order, res.Modules) {
				t.Errorf("etc/modules %q, Result.Modules %q", order, res.Modules)
			}
			i := 0
			for _, m := range order {
				if i < len(tc.wantOrder) && m == tc.wantOrder[i] {
					i++
				}
			}
			if i < len(tc.wantOrder) {
				t.Errorf("etc/modules %q lacks %q in that order", order, tc.wantOrder)
			}
			if got := strings.Fields(string(files[NICModulesList])); !reflect.DeepEqual(got, tc.wantNICs) && len(got)+len(tc.wantNICs) > 0 {
				t.Errorf("%s = %q, want %q", NICModulesList, got, tc.wantNICs)
			}
			for _, m := range order {
				if _, ok := files["lib/modules/"+m+".ko"]; !ok {
					t.Errorf("lib/modules/%s.ko missing", m)
				}
			}
			for _, m := range tc.absent {
				if slices.Contains(order, m) || files["lib/modules/"+m+".ko"] != nil {
					t.Errorf("%s is in the initramfs; want it left out", m)
				}
			}
			for _, w := range tc.wantWarn {
				if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), w) {
					t.Errorf("no warning naming %q; log:\n%s", w, logs.String())
				}
			}
			if !bytes.Equal(files["init"], fakeELF(nil)) {
				t.Error("init is not the agent")
			}
			var again bytes.Buffer
			if _, err := Build(&again, o); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), again.Bytes()) {
				t.Error("two builds from the same inputs differ; the initramfs must be reproducible")
			}
		})
	}
}

func TestCompressRefusesUnknown(t *testing.T) {
	_, err := compress(io.Discard, []byte("x"), "lzo", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "want xz or gzip") {
		t.Errorf("compress lzo: %v, want it refused", err)
	}
}
