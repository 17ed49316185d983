package imagestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// Format is the on-disk format of an uploaded image. Its String is
// qemu-img's name for it, the argument of -f.
type Format int

// The formats DetectFormat tells apart. Raw is served as uploaded; the
// others are converted to raw with qemu-img.
const (
	Raw   Format = iota // anything not recognised: a disk or filesystem image
	QCOW                // qcow version 1
	QCOW2               // qcow2, versions 2 and 3
	VMDK                // VMDK sparse extent holding the whole disk (monolithicSparse, streamOptimized)
	VHDX                // Hyper-V VHDX
	VPC                 // Microsoft VHD, dynamic
	VDI                 // VirtualBox VDI
)

var formatNames = [...]string{Raw: "raw", QCOW: "qcow", QCOW2: "qcow2", VMDK: "vmdk", VHDX: "vhdx", VPC: "vpc", VDI: "vdi"}

func (f Format) String() string {
	if f >= 0 && int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// HeaderSize is how many leading bytes DetectFormat wants: every header
// field it reads lies within them.
const HeaderSize = 512

// DetectFormat tells the format of an image from its first bytes: the
// first HeaderSize bytes, or the whole image when it is shorter. It goes by
// the content only, never by a file name.
//
// It also refuses what the header alone shows the server cannot take, so
// a client can refuse before uploading: an image naming other files
// (ErrExternalFile: a qcow or qcow2 backing file, a qcow2 external data
// file, a VMDK descriptor file, a differencing VHD), a variant qemu-img
// cannot convert unattended (ErrUnsupported: encrypted qcow, qcow version
// above 3, QED), and a header cut short (ErrBadImage).
//
// A fixed VHD is raw content with a footer at its end: it is Raw, and the
// machine sees the footer as its last sector.
func DetectFormat(h []byte) (Format, error) {
	switch {
	case bytes.HasPrefix(h, []byte("QFI\xfb")):
		return detectQCOW(h)
	case bytes.HasPrefix(h, []byte("KDMV")):
		return detectVMDK(h)
	case bytes.HasPrefix(h, []byte("COWD")): // VMDK3 (ESX) sparse extent: no descriptor
		return VMDK, nil
	case bytes.HasPrefix(h, []byte("vhdxfile")):
		return VHDX, nil
	case bytes.HasPrefix(h, []byte("conectix")):
		return detectVPC(h)
	case len(h) >= 68 && binary.LittleEndian.Uint32(h[64:]) == 0xbeda107f:
		return VDI, nil
	case bytes.HasPrefix(h, []byte("QED\x00")):
		return Raw, refuse(ErrUnsupported, "QED image: this server converts raw, qcow2, VMDK, VHDX, VHD and VDI images; convert it first: qemu-img convert -O qcow2 IN.qed OUT.qcow2")
	case isVMDKDescriptor(h):
		return Raw, refuse(ErrExternalFile, "VMDK descriptor file: its data is in the extent files it names, which are not uploaded; %s", vmdkAdvice)
	}
	return Raw, nil
}

const vmdkAdvice = "convert it to a single file first: qemu-img convert -O vmdk -o subformat=monolithicSparse IN.vmdk OUT.vmdk (or -O qcow2)"

// detectQCOW reads a qcow (version 1) or qcow2 header, big-endian:
//
//	offset  field
//	0       magic "QFI\xfb"
//	4       version: 1 (qcow), 2 or 3 (qcow2)
//	8       backing file offset, 0 for none
//	16      backing file name length
//	32      crypt method (qcow2; qcow has it at 36)
//	72      incompatible features (v3; bit 2: external data file)
//
// The header is 48 bytes long in version 1, 72 in 2, 104 or more in 3.
func detectQCOW(h []byte) (Format, error) {
	if len(h) < 8 {
		return Raw, cutShort("qcow", len(h), 8)
	}
	version := binary.BigEndian.Uint32(h[4:])
	f, min, crypt := QCOW2, 72, 32
	switch version {
	case 1:
		f, min, crypt = QCOW, 48, 36
	case 2:
	case 3:
		min = 104
	default:
		return Raw, refuse(ErrUnsupported, "qcow2 image of version %d: want version 1, 2 or 3; convert it with a newer qemu-img first: qemu-img convert -O qcow2 -o compat=1.1 IN OUT.qcow2", version)
	}
	if len(h) < min {
		return Raw, cutShort(f.String(), len(h), min)
	}
	if off := binary.BigEndian.Uint64(h[8:]); off != 0 {
		return Raw, refuse(ErrExternalFile, "%s image has a backing file%s, which is not uploaded; merge it into one image first: qemu-img convert -O qcow2 IN.qcow2 MERGED.qcow2", f, backingName(h, off))
	}
	if m := binary.BigEndian.Uint32(h[crypt:]); m != 0 {
		return Raw, refuse(ErrUnsupported, "%s image is encrypted (method %d): the server cannot decrypt it; convert it to an unencrypted qcow2 or raw image first with qemu-img convert and its passphrase", f, m)
	}
	if version == 3 && binary.BigEndian.Uint64(h[72:])&(1<<2) != 0 {
		return Raw, refuse(ErrExternalFile, "qcow2 image keeps its data in an external data file, which is not uploaded; convert it to one file first: qemu-img convert -O qcow2 IN.qcow2 OUT.qcow2")
	}
	return f, nil
}

// backingName quotes the backing file name when it lies within h.
func backingName(h []byte, off uint64) string {
	n := uint64(binary.BigEndian.Uint32(h[16:]))
	if off >= uint64(len(h)) || n == 0 || n > uint64(len(h))-off {
		return ""
	}
	return fmt.Sprintf(" (%.200q)", h[off:off+n])
}

// detectVMDK reads a VMDK4 sparse extent header, little-endian:
//
//	offset  field
//	0       magic "KDMV"
//	4       version
//	8       flags
//	12      capacity in sectors
//	28      embedded descriptor offset in sectors
//
// An extent of capacity 0 is not a disk: its embedded descriptor names
// the extents, which may be other files.
func detectVMDK(h []byte) (Format, error) {
	if len(h) < 20 {
		return Raw, cutShort("vmdk", len(h), 20)
	}
	if binary.LittleEndian.Uint64(h[12:]) == 0 {
		return Raw, refuse(ErrExternalFile, "VMDK extent of capacity 0: its embedded descriptor names the extents holding the data, which are not uploaded; %s", vmdkAdvice)
	}
	return VMDK, nil
}

// detectVPC reads the copy of the VHD footer at the start of a dynamic
// VHD, big-endian: 0 cookie "conectix", 60 disk type (2 fixed, 3
// dynamic, 4 differencing).
func detectVPC(h []byte) (Format, error) {
	if len(h) < 64 {
		return Raw, cutShort("vpc", len(h), 64)
	}
	switch t := binary.BigEndian.Uint32(h[60:]); t {
	case 2, 3:
		return VPC, nil
	case 4:
		return Raw, refuse(ErrExternalFile, "differencing VHD: its parent disk is not uploaded; merge it into one image first (qemu-img convert -O vpc, or Merge-VHD on Windows)")
	default:
		return Raw, refuse(ErrBadImage, "VHD of disk type %d: want 2 (fixed) or 3 (dynamic); the header is damaged", t)
	}
}

// isVMDKDescriptor reports whether h is the text of a VMDK descriptor
// file: its first line that is neither blank nor a comment sets version=.
func isVMDKDescriptor(h []byte) bool {
	if bytes.HasPrefix(h, []byte("# Disk DescriptorFile")) {
		return true
	}
	for _, line := range strings.Split(string(h), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#':
			continue
		case strings.HasPrefix(line, "version="):
			return true
		}
		return false
	}
	return false
}

func cutShort(format string, got, want int) error {
	return refuse(ErrBadImage, "%s image cut short: got %d bytes of its header, want %d", format, got, want)
}
