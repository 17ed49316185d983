package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"github.com/bootfleet/bootfleet/internal/testutil"
	"testing"
)

// fuzzSeeds are the synthetic stubs behind testdata/fuzz/FuzzStub: a
// good one of each shape and one of each refusal.
func fuzzSeeds() map[string][]byte {
	debian := stubPE()
	debian.secAlign = 0x200
	full := stubPE()
	full.lfanew, full.sizeOfHdrs, full.sections = 0x58, 0x200, []string{".text", ".data", ".sdmagic"}
	signed := stubPE()
	signed.signed = true
	pe32 := stubPE()
	pe32.magic = 0x10b
	uki := stubPE()
	uki.sections = append(uki.sections, ".linux")
	return map[string][]byte{
		"stub": stubPE().build(), "debian-alignment": debian.build(), "no-header-room": full.build(),
		"signed": signed.build(), "pe32": pe32.build(), "already-uki": uki.build(),
	}
}

// TestFuzzSeeds keeps testdata/fuzz/FuzzStub in step with fuzzSeeds;
// UPDATE_TESTDATA=1 rewrites it.
func TestFuzzSeeds(t *testing.T) {
	testutil.FuzzSeeds(t, "FuzzStub", fuzzSeeds())
}

// FuzzStub feeds Build arbitrary stubs. It must never panic, and whatever
// it accepts must be a PE image debug/pe reads, with the kernel and
// initrd in .linux and .initrd, and exactly Size bytes long.
func FuzzStub(f *testing.F) {
	f.Fuzz(func(t *testing.T, stub []byte) {
		// A kernel of whatever machine the stub claims, so fuzzing gets
		// past the architecture check.
		var machine uint16
		if len(stub) >= 64 {
			if at := int(binary.LittleEndian.Uint32(stub[dosLfanew:])); at >= 0 && at+6 <= len(stub) {
				machine = binary.LittleEndian.Uint16(stub[at+4:])
			}
		}
		kernel := kernelPE(machine)
		rd := []byte("initrd")
		img := Image{Stub: blob(stub), Kernel: blob(kernel), Initrds: []Blob{blob(rd)}}
		var out bytes.Buffer
		n, err := Build(&out, img)
		if err != nil {
			return
		}
		if size, _ := Size(img); n != int64(out.Len()) || size != n {
			t.Fatalf("Build returned %d and Size %d, wrote %d bytes", n, size, out.Len())
		}
		file, err := pe.NewFile(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("Build accepted the stub but debug/pe cannot read the image: %v", err)
		}
		for name, want := range map[string][]byte{SectionLinux: kernel, SectionInitrd: rd} {
			s := file.Section(name)
			if s == nil {
				t.Fatalf("no %s section", name)
			}
			data, err := s.Data()
			if err != nil || !bytes.HasPrefix(data, want) || int(s.VirtualSize) != len(want) {
				t.Fatalf("%s: %d bytes (VirtualSize %d, %v), want %d", name, len(data), s.VirtualSize, err, len(want))
			}
		}
	})
}
