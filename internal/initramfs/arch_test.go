package initramfs

import (
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"
)

// elfHeader is the 64-byte header of an empty little-endian ELF64
// relocatable object for machine m: what elf.NewFile needs to say its
// machine.
func elfHeader(m elf.Machine) []byte {
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_REL))
	binary.LittleEndian.PutUint16(h[18:], uint16(m))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	return h
}

// TestSameArch: an arm64 kernel's modules with an x86_64 agent or busybox
// are refused, naming what to use instead; matching ones pass.
func TestSameArch(t *testing.T) {
	arm, x86 := elfHeader(elf.EM_AARCH64), elf.EM_X86_64
	if err := sameArch(elfHeader(elf.EM_X86_64), "nbd", x86, "agent", x86, "bb"); err != nil {
		t.Errorf("x86_64 throughout: %v", err)
	}
	if err := sameArch(arm, "nbd", elf.EM_AARCH64, "agent", elf.EM_AARCH64, "bb"); err != nil {
		t.Errorf("arm64 throughout: %v", err)
	}
	if err := sameArch(arm, "nbd", x86, "bin/bootfleet-agent", elf.EM_AARCH64, "bb"); err == nil || !strings.Contains(err.Error(), "bootfleet-agent-arm64") {
		t.Errorf("an x86_64 agent with arm64 modules: %v, want it refused naming bootfleet-agent-arm64", err)
	}
	if err := sameArch(arm, "nbd", elf.EM_AARCH64, "agent", x86, "/bin/busybox"); err == nil || !strings.Contains(err.Error(), "busybox-static:arm64") {
		t.Errorf("an x86_64 busybox with arm64 modules: %v, want it refused naming busybox-static:arm64", err)
	}
	if err := sameArch([]byte("not elf"), "nbd", x86, "a", x86, "b"); err == nil {
		t.Error("a module that is not ELF passed")
	}
}
