package uki

import (
	"encoding/binary"
)

// testPE describes a synthetic PE image for the tests: a real stub is
// 80 KB of someone else's code, and these few fields are all Build reads.
type testPE struct {
	machine     uint16
	magic       uint16
	subsystem   uint16
	secAlign    uint32
	fileAlign   uint32
	sizeOfHdrs  uint32
	sections    []string // each gets fileAlign+7 bytes of data
	signed      bool
	trailer     int // bytes after the last section's data, as a symbol table would be
	sizeOfInit  uint32
	lfanew      uint32
	noDataDirs  bool
	rawPastFile bool // the last section claims data beyond the file's end
}

// stubPE is a stub shaped like Debian's linuxx64.efi.stub.
func stubPE() testPE {
	return testPE{
		machine: 0x8664, magic: magicPE32Plus, subsystem: subsystemEFIApplication,
		secAlign: 0x1000, fileAlign: 0x200, sizeOfHdrs: 0x400,
		sections: []string{".text", ".reloc", ".data", ".sdmagic"}, sizeOfInit: 0x5000, lfanew: 0x80,
	}
}

// sectionData is the content of the i'th synthetic section.
func sectionData(i int, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b
}

func (p testPE) build() []byte {
	le := binary.LittleEndian
	ndirs := uint32(16)
	if p.noDataDirs {
		ndirs = 0
	}
	optSize := optDataDirectories + 8*int(ndirs)
	f := make([]byte, p.sizeOfHdrs)
	f[0], f[1] = 'M', 'Z'
	le.PutUint32(f[dosLfanew:], p.lfanew)
	copy(f[p.lfanew:], "PE\x00\x00")
	coff := f[p.lfanew+4:]
	le.PutUint16(coff, p.machine)
	le.PutUint16(coff[2:], uint16(len(p.sections)))
	le.PutUint16(coff[16:], uint16(optSize))
	le.PutUint16(coff[18:], 0x206)
	opt := coff[coffSize:]
	le.PutUint16(opt, p.magic)
	le.PutUint32(opt[optSizeOfInitializedData:], p.sizeOfInit)
	le.PutUint32(opt[optSectionAlignment:], p.secAlign)
	le.PutUint32(opt[optFileAlignment:], p.fileAlign)
	le.PutUint32(opt[optSizeOfHeaders:], p.sizeOfHdrs)
	le.PutUint32(opt[optCheckSum:], 0x1aa6c)
	le.PutUint16(opt[optSubsystem:], p.subsystem)
	le.PutUint32(opt[optNumberOfRvaAndSizes:], ndirs)
	table := opt[optSize:]
	// The table first, then the data: appending to f would leave table
	// pointing at the old array.
	virt := alignUp(int64(p.sizeOfHdrs), int64(p.secAlign))
	size := int(p.fileAlign) + 7
	raw := alignUp(int64(size), int64(p.fileAlign))
	at := int64(len(f))
	for i, name := range p.sections {
		s := table[i*sectionHeaderSize:]
		copy(s, name)
		le.PutUint32(s[8:], uint32(size))
		le.PutUint32(s[12:], uint32(virt))
		le.PutUint32(s[16:], uint32(raw))
		le.PutUint32(s[20:], uint32(at))
		if p.rawPastFile && i == len(p.sections)-1 {
			le.PutUint32(s[20:], uint32(at)+0x10000)
		}
		le.PutUint32(s[36:], 0x40000040)
		virt = alignUp(virt+int64(size), int64(p.secAlign))
		at += raw
	}
	for i := range p.sections {
		f = append(f, sectionData(i, size)...)
		f = append(f, make([]byte, raw-int64(size))...)
	}
	le.PutUint32(f[p.lfanew+4+coffSize+optSizeOfImage:], uint32(virt))
	if p.signed {
		d := f[p.lfanew+4+coffSize+optDataDirectories+8*dirSecurity:]
		le.PutUint32(d, uint32(len(f)))
		le.PutUint32(d[4:], 16)
	}
	for i := range p.trailer {
		f = append(f, byte(0xa0+i))
	}
	return f
}
