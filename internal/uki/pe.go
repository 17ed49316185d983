package uki

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
)

// Errors Build wraps; the message around them says which input and what
// was found.
var (
	// ErrNotPE: the input is not a well-formed PE/COFF image.
	ErrNotPE = errors.New("not a PE/COFF image")
	// ErrNotEFIApplication: a PE image, but not a PE32+ EFI application.
	ErrNotEFIApplication = errors.New("not a PE32+ EFI application")
	// ErrNoHeaderRoom: the stub's headers end before its first section's
	// data leaves room for three more section headers.
	ErrNoHeaderRoom = errors.New("no room in the stub's headers for more section headers")
	// ErrSigned: the stub carries an Authenticode signature, which the
	// appended sections would void.
	ErrSigned = errors.New("stub is signed")
	// ErrAlreadyUKI: the stub already has a section Build would add.
	ErrAlreadyUKI = errors.New("stub already has a UKI section")
	// ErrMachine: the kernel is built for another architecture than the stub.
	ErrMachine = errors.New("kernel and stub architectures differ")
	// ErrTooLarge: the image would not fit PE's 32-bit sizes and addresses.
	ErrTooLarge = errors.New("image larger than PE's 4 GiB limit")
)

// PE/COFF layout (Microsoft "PE Format"): an MS-DOS stub whose offset 0x3c
// points at "PE\0\0", then the 20-byte COFF file header, the optional
// header and the section table.
//
//	+0x00 COFF: Machine u16 | NumberOfSections u16 | ... | SizeOfOptionalHeader u16 (+0x10) | Characteristics u16
//	+0x14 optional header (PE32+): Magic u16 = 0x20b | ... | SizeOfInitializedData u32 (+0x08) | ...
//	      SectionAlignment u32 (+0x20) | FileAlignment u32 (+0x24) | ... | SizeOfImage u32 (+0x38)
//	      SizeOfHeaders u32 (+0x3c) | CheckSum u32 (+0x40) | Subsystem u16 (+0x44) | ...
//	      NumberOfRvaAndSizes u32 (+0x6c) | data directories, 8 bytes each (+0x70)
//	section table: 40 bytes a section
//	      Name [8]byte | VirtualSize u32 | VirtualAddress u32 | SizeOfRawData u32 | PointerToRawData u32 | ... | Characteristics u32 (+0x24)
const (
	dosLfanew         = 0x3c
	coffSize          = 20
	sectionHeaderSize = 40

	optSizeOfInitializedData = 0x08
	optSectionAlignment      = 0x20
	optFileAlignment         = 0x24
	optSizeOfImage           = 0x38
	optSizeOfHeaders         = 0x3c
	optCheckSum              = 0x40
	optSubsystem             = 0x44
	optNumberOfRvaAndSizes   = 0x6c
	optDataDirectories       = 0x70

	magicPE32Plus           = 0x20b
	subsystemEFIApplication = 10
	dirSecurity             = 4

	// maxHeaders bounds what is read as headers: real stubs have 1 KiB.
	maxHeaders = 1 << 20
)

// machines are the PE32+ architectures systemd-stub is built for that
// Debian ships (loongarch64 is left out: Go's debug/pe, which the tests
// check images with, does not know it).
var machines = map[uint16]string{0x8664: "x86-64", 0xaa64: "arm64", 0x5064: "riscv64"}

// section is one entry of a section table.
type section struct {
	name                   string
	virtualSize, virtualAt uint32
	rawSize, rawAt         uint32
}

// header is a parsed PE32+ EFI application header.
type header struct {
	raw         []byte // the file's first SizeOfHeaders bytes (fewer if the file is shorter)
	optAt       int    // offset of the optional header
	tableAt     int    // offset of the section table
	machine     uint16
	sections    []section
	secAlign    uint32
	fileAlign   uint32
	sizeOfImage uint32
	sizeOfHdrs  uint32
	signed      bool
}

// readHeader parses the headers of a PE32+ EFI application of size bytes;
// what names the input in errors.
func readHeader(r io.ReaderAt, size int64, what string) (*header, error) {
	var dos [64]byte
	if err := readAt(r, size, dos[:], 0); err != nil || dos[0] != 'M' || dos[1] != 'Z' {
		return nil, fmt.Errorf("%s: want an MS-DOS header starting MZ, got %q of %d bytes: %w", what, prefix(dos[:], size), size, ErrNotPE)
	}
	peAt := int64(binary.LittleEndian.Uint32(dos[dosLfanew:]))
	var fixed [4 + coffSize + optDataDirectories]byte
	if err := readAt(r, size, fixed[:], peAt); err != nil || string(fixed[:4]) != "PE\x00\x00" {
		return nil, fmt.Errorf("%s: want the PE signature at offset %#x (from offset 0x3c), the file has %d bytes: %w", what, peAt, size, ErrNotPE)
	}
	coff := fixed[4:]
	opt := fixed[4+coffSize:]
	if m := binary.LittleEndian.Uint16(opt); m != magicPE32Plus {
		return nil, fmt.Errorf("%s: optional header magic %#x, want %#x (PE32+): %w", what, m, magicPE32Plus, ErrNotEFIApplication)
	}
	if s := binary.LittleEndian.Uint16(opt[optSubsystem:]); s != subsystemEFIApplication {
		return nil, fmt.Errorf("%s: subsystem %d, want %d (EFI application): %w", what, s, subsystemEFIApplication, ErrNotEFIApplication)
	}
	if _, ok := machines[binary.LittleEndian.Uint16(coff)]; !ok {
		return nil, fmt.Errorf("%s: PE machine %#x, want x86-64, arm64 or riscv64: %w", what, binary.LittleEndian.Uint16(coff), ErrNotEFIApplication)
	}
	h := &header{
		machine:     binary.LittleEndian.Uint16(coff),
		secAlign:    binary.LittleEndian.Uint32(opt[optSectionAlignment:]),
		fileAlign:   binary.LittleEndian.Uint32(opt[optFileAlignment:]),
		sizeOfImage: binary.LittleEndian.Uint32(opt[optSizeOfImage:]),
		sizeOfHdrs:  binary.LittleEndian.Uint32(opt[optSizeOfHeaders:]),
	}
	nsec := int(binary.LittleEndian.Uint16(coff[2:]))
	optSize := int64(binary.LittleEndian.Uint16(coff[16:]))
	ndirs := int64(binary.LittleEndian.Uint32(opt[optNumberOfRvaAndSizes:]))
	// EDK II's PE loader insists on exactly this, so a stub that fails it
	// would not boot.
	if ndirs > 16 || optSize != optDataDirectories+8*ndirs {
		return nil, fmt.Errorf("%s: optional header of %d bytes with %d data directories, want %d bytes and at most 16: %w",
			what, optSize, ndirs, optDataDirectories+8*min(ndirs, 16), ErrNotPE)
	}
	h.optAt = int(peAt) + 4 + coffSize
	h.tableAt = h.optAt + int(optSize)
	tableEnd := int64(h.tableAt) + int64(nsec)*sectionHeaderSize
	if tableEnd > maxHeaders || tableEnd > size {
		return nil, fmt.Errorf("%s: section table of %d entries ends at %d, past the file's %d bytes: %w", what, nsec, tableEnd, size, ErrNotPE)
	}
	// The headers Build rewrites are SizeOfHeaders bytes, which must hold
	// the table; a shorter file is only tolerated for the kernel, whose
	// headers are read, never rewritten.
	n := max(min(int64(h.sizeOfHdrs), size, maxHeaders), tableEnd)
	h.raw = make([]byte, n)
	if err := readAt(r, size, h.raw, 0); err != nil {
		return nil, fmt.Errorf("%s: read %d bytes of headers: %w", what, n, err)
	}
	if ndirs > dirSecurity {
		d := h.raw[h.optAt+optDataDirectories+8*dirSecurity:]
		h.signed = binary.LittleEndian.Uint32(d[4:]) != 0
	}
	for i := range nsec {
		b := h.raw[h.tableAt+i*sectionHeaderSize:]
		h.sections = append(h.sections, section{
			name:        sectionName(b[:8]),
			virtualSize: binary.LittleEndian.Uint32(b[8:]),
			virtualAt:   binary.LittleEndian.Uint32(b[12:]),
			rawSize:     binary.LittleEndian.Uint32(b[16:]),
			rawAt:       binary.LittleEndian.Uint32(b[20:]),
		})
	}
	return h, nil
}

// checkStub is what a stub needs beyond being an EFI application: sane
// alignments, sections inside the file, no signature, none of the UKI's
// sections, and room for add more section headers.
func (h *header) checkStub(size int64, add []string) error {
	if !pow2(h.fileAlign) || h.fileAlign > 1<<16 || !pow2(h.secAlign) || h.secAlign < h.fileAlign {
		return fmt.Errorf("stub: SectionAlignment %#x and FileAlignment %#x, want powers of two with FileAlignment at most 64 KiB and SectionAlignment no less: %w",
			h.secAlign, h.fileAlign, ErrNotPE)
	}
	if h.signed {
		return fmt.Errorf("stub: has a certificate table; build from the unsigned stub and sign the UKI: %w", ErrSigned)
	}
	firstRaw := int64(h.sizeOfHdrs)
	for _, s := range h.sections {
		if end := int64(s.rawAt) + int64(s.rawSize); end > size {
			return fmt.Errorf("stub: section %q data ends at %d, past the file's %d bytes: %w", s.name, end, size, ErrNotPE)
		}
		if s.rawSize > 0 {
			firstRaw = min(firstRaw, int64(s.rawAt))
		}
		for _, a := range add {
			if s.name == a {
				return fmt.Errorf("stub: already has a %s section; is it a UKI rather than the stub? %w", a, ErrAlreadyUKI)
			}
		}
	}
	need := int64(h.tableAt) + int64(len(h.sections)+len(add))*sectionHeaderSize
	if need > firstRaw || need > int64(len(h.raw)) {
		return fmt.Errorf("stub: %d more section headers need its headers to reach %d bytes, but they end at %d (SizeOfHeaders %d, first section data at %d): %w",
			len(add), need, min(firstRaw, int64(len(h.raw))), h.sizeOfHdrs, firstRaw, ErrNoHeaderRoom)
	}
	return nil
}

// readAt fills b from offset off of a file of size bytes.
func readAt(r io.ReaderAt, size int64, b []byte, off int64) error {
	if off < 0 || off+int64(len(b)) > size {
		return io.ErrUnexpectedEOF
	}
	_, err := r.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil // a ReaderAt may report EOF with the last byte read
	}
	return err
}

// prefix is what readHeader shows of a file too short or wrong from the start.
func prefix(b []byte, size int64) []byte {
	return b[:min(int64(len(b)), size, 4)]
}

func sectionName(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func pow2(x uint32) bool { return x != 0 && bits.OnesCount32(x) == 1 }
