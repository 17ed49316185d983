package uki

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Blob is one input file: Size bytes read through R.
type Blob struct {
	R    io.ReaderAt
	Size int64
}

// Image is what a UKI is built from.
type Image struct {
	// Stub is systemd-stub, e.g. Debian's
	// /usr/lib/systemd/boot/efi/linuxx64.efi.stub (package
	// systemd-boot-efi). It must be unsigned: sign the UKI instead.
	Stub Blob
	// Kernel is a Linux kernel with its EFI stub (x86 bzImage, arm64
	// Image), for the stub's architecture.
	Kernel Blob
	// Initrds are concatenated into .initrd, each padded with zeros to a
	// multiple of 4 bytes. None means no .initrd section.
	Initrds []Blob
	// OSRel is os-release(5) text for .osrel; Size 0 means no .osrel.
	OSRel Blob
}

// Section names systemd-stub looks for.
const (
	SectionOSRel  = ".osrel"
	SectionLinux  = ".linux"
	SectionInitrd = ".initrd"
)

// scnData marks an added section initialized, readable data
// (IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ).
const scnData = 0x00000040 | 0x40000000

// Build writes the unified kernel image of img to w and returns the number
// of bytes written, which Size gives beforehand.
func Build(w io.Writer, img Image) (int64, error) {
	l, err := plan(img)
	if err != nil {
		return 0, err
	}
	o := &output{w: w}
	err = l.write(o, img)
	return o.at, err
}

// Size returns the size of the image Build would write, reading only the
// stub's and the kernel's headers.
func Size(img Image) (int64, error) {
	l, err := plan(img)
	if err != nil {
		return 0, err
	}
	return l.size, nil
}

// part is one added section.
type part struct {
	name      string
	blobs     []Blob
	dataSize  int64 // the blobs and the padding between them
	virtualAt int64
	rawAt     int64
	rawSize   int64
}

// layout is where everything goes.
type layout struct {
	stub    *header
	parts   []part
	stubEnd int64 // the stub's bytes, padded to FileAlignment
	image   int64 // SizeOfImage
	size    int64 // file size
}

func plan(img Image) (*layout, error) {
	stub, err := readHeader(img.Stub.R, img.Stub.Size, "stub")
	if err != nil {
		return nil, err
	}
	kernel, err := readHeader(img.Kernel.R, img.Kernel.Size, "kernel")
	if err != nil {
		return nil, err
	}
	if kernel.machine != stub.machine {
		return nil, fmt.Errorf("kernel is for %s, the stub for %s; use the stub of the kernel's architecture: %w",
			machines[kernel.machine], machines[stub.machine], ErrMachine)
	}
	var parts []part
	if img.OSRel.Size > 0 {
		parts = append(parts, part{name: SectionOSRel, blobs: []Blob{img.OSRel}, dataSize: img.OSRel.Size})
	}
	parts = append(parts, part{name: SectionLinux, blobs: []Blob{img.Kernel}, dataSize: img.Kernel.Size})
	if rd := initrdSize(img.Initrds); rd > 0 {
		parts = append(parts, part{name: SectionInitrd, blobs: img.Initrds, dataSize: rd})
	}
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	if err := stub.checkStub(img.Stub.Size, names); err != nil {
		return nil, err
	}

	l := &layout{stub: stub, stubEnd: alignUp(img.Stub.Size, int64(stub.fileAlign))}
	virt := int64(stub.sizeOfImage)
	for _, s := range stub.sections {
		virt = max(virt, int64(s.virtualAt)+int64(max(s.virtualSize, s.rawSize)))
	}
	virt = alignUp(virt, int64(stub.secAlign))
	raw := l.stubEnd
	for i := range parts {
		p := &parts[i]
		p.virtualAt, p.rawAt = virt, raw
		p.rawSize = alignUp(p.dataSize, int64(stub.fileAlign))
		virt = alignUp(virt+p.dataSize, int64(stub.secAlign))
		raw += p.rawSize
		if virt > math.MaxUint32 || raw > math.MaxUint32 {
			return nil, fmt.Errorf("%s of %d bytes ends at address %#x, file offset %#x: %w", p.name, p.dataSize, virt, raw, ErrTooLarge)
		}
	}
	l.parts, l.image, l.size = parts, virt, raw
	return l, nil
}

// initrdSize is the length of the initrds concatenated. Every one but the
// last is padded to 4 bytes because the kernel looks for an uncompressed
// cpio archive only at a 4-byte boundary and skips the zeros before it
// (init/initramfs.c); compressed archives do not mind.
func initrdSize(rds []Blob) int64 {
	var n int64
	for i, rd := range rds {
		n += rd.Size
		if i < len(rds)-1 {
			n = alignUp(n, 4)
		}
	}
	return n
}

// headers returns the stub's headers rewritten for the added sections.
func (l *layout) headers() []byte {
	h := l.stub
	b := append([]byte(nil), h.raw...)
	le := binary.LittleEndian
	opt := b[h.optAt:]
	var added int64
	for i, p := range l.parts {
		s := b[h.tableAt+(len(h.sections)+i)*sectionHeaderSize:][:sectionHeaderSize]
		clear(s)
		copy(s[:8], p.name)
		le.PutUint32(s[8:], uint32(p.dataSize))
		le.PutUint32(s[12:], uint32(p.virtualAt))
		le.PutUint32(s[16:], uint32(p.rawSize))
		le.PutUint32(s[20:], uint32(p.rawAt))
		le.PutUint32(s[36:], scnData)
		added += p.rawSize
	}
	coff := b[h.optAt-coffSize:]
	le.PutUint16(coff[2:], uint16(len(h.sections)+len(l.parts)))
	// A COFF symbol table is debugging data the PE format deprecates for
	// images and firmware never reads; dropping the pointer keeps tools
	// from reading whatever lies at that offset now.
	le.PutUint32(coff[8:], 0)
	le.PutUint32(coff[12:], 0)
	le.PutUint32(opt[optSizeOfImage:], uint32(l.image))
	init := min(int64(le.Uint32(opt[optSizeOfInitializedData:]))+added, math.MaxUint32)
	le.PutUint32(opt[optSizeOfInitializedData:], uint32(init))
	// The stub's checksum no longer matches; zero means "not set", and
	// UEFI firmware checks neither.
	le.PutUint32(opt[optCheckSum:], 0)
	return b
}

func (l *layout) write(o *output, img Image) error {
	hdr := l.headers()
	if err := o.bytes(hdr); err != nil {
		return err
	}
	rest := img.Stub.Size - int64(len(hdr))
	if err := o.blob(Blob{io.NewSectionReader(img.Stub.R, int64(len(hdr)), rest), rest}, "stub"); err != nil {
		return err
	}
	for _, p := range l.parts {
		if err := o.zerosTo(p.rawAt); err != nil {
			return err
		}
		for i, b := range p.blobs {
			if err := o.blob(b, p.name); err != nil {
				return err
			}
			if i < len(p.blobs)-1 {
				if err := o.zerosTo(p.rawAt + alignUp(o.at-p.rawAt, 4)); err != nil {
					return err
				}
			}
		}
	}
	return o.zerosTo(l.size)
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

// output is the image being written and how far it has got.
type output struct {
	w  io.Writer
	at int64
}

func (o *output) bytes(b []byte) error {
	n, err := o.w.Write(b)
	o.at += int64(n)
	return err
}

// blob copies all of b; what names it in errors.
func (o *output) blob(b Blob, what string) error {
	n, err := io.Copy(o.w, io.NewSectionReader(b.R, 0, b.Size))
	o.at += n
	if err != nil {
		return fmt.Errorf("copy %s: %w", what, err)
	}
	if n != b.Size {
		return fmt.Errorf("copy %s: read %d bytes, want its size %d: %w", what, n, b.Size, io.ErrUnexpectedEOF)
	}
	return nil
}

var zeroBlock [4096]byte

// zerosTo pads with zeros up to offset end.
func (o *output) zerosTo(end int64) error {
	for o.at < end {
		if err := o.bytes(zeroBlock[:min(end-o.at, int64(len(zeroBlock)))]); err != nil {
			return err
		}
	}
	return nil
}
