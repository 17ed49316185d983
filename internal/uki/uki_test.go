package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func blob(b []byte) Blob { return Blob{bytes.NewReader(b), int64(len(b))} }

// kernelPE is a synthetic kernel: Build copies it whole and reads only its
// machine type.
func kernelPE(machine uint16) []byte {
	k := testPE{
		machine: machine, magic: magicPE32Plus, subsystem: subsystemEFIApplication,
		secAlign: 0x1000, fileAlign: 0x200, sizeOfHdrs: 0x200, sections: []string{".setup", ".text"}, lfanew: 0x40,
	}
	return append(k.build(), "kernel tail"...)
}

func TestBuild(t *testing.T) {
	debian := stubPE()
	debian.secAlign = 0x200 // Debian 12's stub aligns sections to 512 bytes
	trailer := stubPE()
	trailer.trailer = 37
	bigFile := stubPE()
	bigFile.fileAlign, bigFile.sizeOfHdrs = 0x1000, 0x1000
	// The table starts at 0x58 + 4 + 20 + 240 = 0x160, so 0x200 bytes of
	// headers hold exactly four section headers.
	exact := stubPE()
	exact.lfanew, exact.sizeOfHdrs, exact.sections = 0x58, 0x200, []string{".text", ".data"}

	tests := []struct {
		name    string
		stub    testPE
		initrds [][]byte
		osrel   []byte
	}{
		{name: "one initrd", stub: stubPE(), initrds: [][]byte{[]byte("0707010000 a cpio archive")}},
		{name: "initrds concatenated at 4-byte boundaries", stub: stubPE(),
			initrds: [][]byte{[]byte("12345"), {}, []byte("abcdefghijklm"), []byte("xyzw"), []byte("!")}},
		{name: "osrel", stub: stubPE(), initrds: [][]byte{[]byte("rd")}, osrel: []byte("ID=debian\nVERSION_ID=12\n")},
		{name: "no initrd", stub: stubPE()},
		{name: "section alignment 512 as Debian's stub", stub: debian, initrds: [][]byte{bytes.Repeat([]byte{7}, 1000)}},
		{name: "bytes after the stub's sections kept", stub: trailer, initrds: [][]byte{[]byte("rd")}},
		{name: "file alignment 4096", stub: bigFile, initrds: [][]byte{[]byte("rd")}, osrel: []byte("ID=x\n")},
		{name: "headers exactly full", stub: exact, initrds: [][]byte{[]byte("rd")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := tt.stub.build()
			kernel := kernelPE(tt.stub.machine)
			img := Image{Stub: blob(stub), Kernel: blob(kernel), OSRel: blob(tt.osrel)}
			var rd []byte
			for i, b := range tt.initrds {
				img.Initrds = append(img.Initrds, blob(b))
				rd = append(rd, b...)
				if i < len(tt.initrds)-1 {
					rd = append(rd, make([]byte, int(alignUp(int64(len(rd)), 4))-len(rd))...)
				}
			}
			var out bytes.Buffer
			n, err := Build(&out, img)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(out.Len()) {
				t.Errorf("Build returned %d, wrote %d bytes", n, out.Len())
			}
			if s, err := Size(img); err != nil || s != n {
				t.Errorf("Size = %d, %v; want %d, the bytes Build wrote", s, err, n)
			}
			want := []struct {
				name string
				data []byte
			}{}
			if len(tt.osrel) > 0 {
				want = append(want, struct {
					name string
					data []byte
				}{SectionOSRel, tt.osrel})
			}
			want = append(want, struct {
				name string
				data []byte
			}{SectionLinux, kernel})
			if len(rd) > 0 {
				want = append(want, struct {
					name string
					data []byte
				}{SectionInitrd, rd})
			}
			checkImage(t, tt.stub, stub, out.Bytes(), want)
		})
	}
}

// checkImage parses out with debug/pe and checks that the stub's sections
// and bytes are untouched, every added section holds its data at the
// stub's alignments, and the headers add up.
func checkImage(t *testing.T, spec testPE, stub, out []byte, added []struct {
	name string
	data []byte
}) {
	t.Helper()
	orig, err := pe.NewFile(bytes.NewReader(stub))
	if err != nil {
		t.Fatalf("debug/pe cannot read the synthetic stub: %v", err)
	}
	f, err := pe.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("debug/pe cannot read the image: %v", err)
	}
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		t.Fatalf("optional header %T, want PE32+", f.OptionalHeader)
	}
	if got, want := len(f.Sections), len(orig.Sections)+len(added); got != want {
		t.Fatalf("%d sections, want %d", got, want)
	}
	if !bytes.Equal(out[spec.sizeOfHdrs:len(stub)], stub[spec.sizeOfHdrs:]) {
		t.Error("the stub's bytes after its headers changed")
	}
	for i, s := range orig.Sections {
		got := f.Sections[i]
		if got.SectionHeader != s.SectionHeader {
			t.Errorf("stub section %d header %+v, want %+v", i, got.SectionHeader, s.SectionHeader)
		}
		a, _ := s.Data()
		b, _ := got.Data()
		if !bytes.Equal(a, b) {
			t.Errorf("stub section %s data changed", s.Name)
		}
	}
	end := uint32(0) // end of the previous section in memory
	for _, s := range f.Sections {
		end = max(end, s.VirtualAddress+max(s.VirtualSize, s.Size))
	}
	lastVirt, lastRaw := uint32(0), uint32(0)
	var raw uint32
	for i, a := range added {
		s := f.Sections[len(orig.Sections)+i]
		if s.Name != a.name {
			t.Errorf("added section %d is %q, want %q", i, s.Name, a.name)
		}
		if s.VirtualAddress%oh.SectionAlignment != 0 || s.Offset%oh.FileAlignment != 0 || s.Size%oh.FileAlignment != 0 {
			t.Errorf("%s at address %#x, file offset %#x, raw size %#x: want multiples of SectionAlignment %#x and FileAlignment %#x",
				s.Name, s.VirtualAddress, s.Offset, s.Size, oh.SectionAlignment, oh.FileAlignment)
		}
		prev := f.Sections[len(orig.Sections)+i-1]
		if s.VirtualAddress < prev.VirtualAddress+max(prev.VirtualSize, prev.Size) || s.Offset < prev.Offset+prev.Size {
			t.Errorf("%s (address %#x, offset %#x) overlaps %s (address %#x+%#x, offset %#x+%#x)",
				s.Name, s.VirtualAddress, s.Offset, prev.Name, prev.VirtualAddress, prev.VirtualSize, prev.Offset, prev.Size)
		}
		if int(s.VirtualSize) != len(a.data) {
			t.Errorf("%s VirtualSize %d, want %d", s.Name, s.VirtualSize, len(a.data))
		}
		if s.Characteristics != pe.IMAGE_SCN_CNT_INITIALIZED_DATA|pe.IMAGE_SCN_MEM_READ {
			t.Errorf("%s characteristics %#x, want initialized readable data", s.Name, s.Characteristics)
		}
		data, err := s.Data()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if !bytes.Equal(data[:len(a.data)], a.data) {
			t.Errorf("%s holds %q..., want %q...", s.Name, head(data), head(a.data))
		}
		if bytes.Count(data[len(a.data):], []byte{0}) != len(data)-len(a.data) {
			t.Errorf("%s padding is not zeros", s.Name)
		}
		lastVirt, lastRaw = s.VirtualAddress+s.VirtualSize, s.Offset+s.Size
		raw += s.Size
	}
	if want := uint32(alignUp(int64(lastVirt), int64(oh.SectionAlignment))); oh.SizeOfImage != want {
		t.Errorf("SizeOfImage %#x, want %#x", oh.SizeOfImage, want)
	}
	if int(lastRaw) != len(out) {
		t.Errorf("last section's data ends at %d, file has %d bytes", lastRaw, len(out))
	}
	if want := spec.sizeOfInit + raw; oh.SizeOfInitializedData != want {
		t.Errorf("SizeOfInitializedData %#x, want %#x", oh.SizeOfInitializedData, want)
	}
	if oh.CheckSum != 0 {
		t.Errorf("CheckSum %#x, want 0 (the stub's no longer matches)", oh.CheckSum)
	}
	if oh.SizeOfHeaders != spec.sizeOfHdrs {
		t.Errorf("SizeOfHeaders %#x, want the stub's %#x", oh.SizeOfHeaders, spec.sizeOfHdrs)
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

func TestBuildErrors(t *testing.T) {
	mod := func(f func(*testPE)) []byte {
		p := stubPE()
		f(&p)
		return p.build()
	}
	x86 := kernelPE(0x8664)
	tests := []struct {
		name   string
		stub   []byte
		kernel []byte
		short  bool // the kernel's reader ends before its Size
		want   error
	}{
		{name: "PE32 stub", stub: mod(func(p *testPE) { p.magic = 0x10b }), want: ErrNotEFIApplication},
		{name: "console application", stub: mod(func(p *testPE) { p.subsystem = 3 }), want: ErrNotEFIApplication},
		{name: "not MZ", stub: append([]byte("ELF"), make([]byte, 200)...), want: ErrNotPE},
		{name: "empty stub", stub: nil, want: ErrNotPE},
		{name: "truncated stub", stub: stubPE().build()[:0x100], want: ErrNotPE},
		{name: "PE signature offset past the end", stub: mod(func(p *testPE) { p.lfanew = 0x80; p.sizeOfHdrs = 0x400 })[:0x90], want: ErrNotPE},
		{name: "no data directories", stub: mod(func(p *testPE) { p.noDataDirs = true }), want: nil},
		{name: "data directories beyond the optional header", stub: func() []byte {
			b := stubPE().build()
			binary.LittleEndian.PutUint32(b[0x80+4+coffSize+optNumberOfRvaAndSizes:], 17)
			return b
		}(), want: ErrNotPE},
		{name: "no header room", stub: mod(func(p *testPE) {
			p.lfanew, p.sizeOfHdrs, p.sections = 0x58, 0x200, []string{".text", ".data", ".sdmagic"} // one more than "headers exactly full"
		}), want: ErrNoHeaderRoom},
		{name: "signed stub", stub: mod(func(p *testPE) { p.signed = true }), want: ErrSigned},
		{name: "already a UKI", stub: mod(func(p *testPE) { p.sections = append(p.sections, ".linux") }), want: ErrAlreadyUKI},
		{name: "section data past the end", stub: mod(func(p *testPE) { p.rawPastFile = true }), want: ErrNotPE},
		{name: "file alignment not a power of two", stub: mod(func(p *testPE) { p.fileAlign = 0x300 }), want: ErrNotPE},
		{name: "section alignment below file alignment", stub: mod(func(p *testPE) { p.secAlign = 0x100 }), want: ErrNotPE},
		{name: "unknown machine", stub: mod(func(p *testPE) { p.machine = 0x3030 }), want: ErrNotEFIApplication},
		{name: "arm64 kernel", kernel: kernelPE(0xaa64), want: ErrMachine},
		{name: "kernel not PE", kernel: []byte("\x1f\x8b gzip, not a kernel with an EFI stub"), want: ErrNotPE},
		{name: "kernel shorter than its size", short: true, want: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub, kernel := tt.stub, tt.kernel
			if stub == nil && tt.name != "empty stub" {
				stub = stubPE().build()
			}
			if kernel == nil {
				kernel = x86
			}
			kb := blob(kernel)
			if tt.short {
				kb.Size += 100
			}
			img := Image{Stub: blob(stub), Kernel: kb, Initrds: []Blob{blob([]byte("rd"))}}
			_, err := Build(io.Discard, img)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Build: %v, want %v", err, tt.want)
			}
			if err != nil {
				t.Logf("%v", err) // the message an admin would read
			}
		})
	}
}
