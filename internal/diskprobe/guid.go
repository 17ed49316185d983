package diskprobe

import (
	"encoding/binary"
	"fmt"
)

// GPT partition type GUIDs this package names. The DPS ones are from the
// UAPI.2 Discoverable Partitions Specification.
const (
	TypeRootX86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709" // DPS root, x86-64
	TypeUsrX86_64  = "8484680c-9521-48c6-9c11-b0720656f69e" // DPS /usr, x86-64
	TypeLinuxData  = "0fc63daf-8483-4772-8e79-3d69d8477de4" // generic Linux file system
	TypeESP        = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" // EFI system partition
	TypeXBOOTLDR   = "bc13c2ff-59e6-4262-a352-b275fd6f7172" // DPS extended boot loader
	TypeSwap       = "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f" // DPS swap
	TypeHome       = "933ac7e1-2eb4-4f13-b844-0e14e2aef915" // DPS /home
	TypeSrv        = "3b8f8425-20e0-4f3b-907f-1a25a76f98e8" // DPS /srv
	TypeVar        = "4d21b016-b534-45c2-a9fb-5c16e091fd2d" // DPS /var
	TypeTmp        = "7ec6f557-3bc5-4aca-b293-16ef5df639d1" // DPS /var/tmp
)

// AttrNoAuto is the DPS no-auto GPT attribute (bit 63): the partition is
// not to be mounted automatically.
const AttrNoAuto = uint64(1) << 63

// typeInfo names a partition type for messages, and says whether the DPS
// (or common sense, for MBR types) puts it somewhere other than /.
type typeInfo struct {
	name    string
	notRoot bool
}

var knownTypes = map[string]typeInfo{
	TypeRootX86_64:                         {"root-x86-64", false},
	TypeUsrX86_64:                          {"usr-x86-64", true},
	TypeLinuxData:                          {"linux", false},
	TypeESP:                                {"esp", true},
	TypeXBOOTLDR:                           {"xbootldr", true},
	TypeSwap:                               {"swap", true},
	TypeHome:                               {"home", true},
	TypeSrv:                                {"srv", true},
	TypeVar:                                {"var", true},
	TypeTmp:                                {"var-tmp", true},
	"21686148-6449-6e6f-744e-656564454649": {"bios-boot", true},
	"ebd0a0a2-b9e5-4433-87c0-68b6b72699c7": {"microsoft-basic-data", false},
	"e6d6d379-f507-44c2-a23c-238f2a3df928": {"linux-lvm", false},
	"a19d880f-05fc-4d3b-a006-743f0f84911e": {"linux-raid", false},
	"0x83":                                 {"linux", false},
	"0x82":                                 {"swap", true},
	"0xef":                                 {"esp", true},
	"0x05":                                 {"extended", true},
	"0x0f":                                 {"extended", true},
	"0x85":                                 {"extended", true},
	"0x0b":                                 {"fat32", false},
	"0x0c":                                 {"fat32", false},
	"0x07":                                 {"ntfs", false},
	"0x8e":                                 {"linux-lvm", false},
	"0xfd":                                 {"linux-raid", false},
}

// typeName is the short name of a partition type, or the type itself.
func typeName(t string) string {
	if i, ok := knownTypes[t]; ok {
		return i.name
	}
	return t
}

// guidString formats a GPT GUID as stored on disk: the first three fields
// are little-endian, the last two big-endian (UEFI 2.10 appendix A).
func guidString(b []byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%x",
		binary.LittleEndian.Uint32(b[0:4]),
		binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]),
		binary.BigEndian.Uint16(b[8:10]),
		b[10:16])
}

// uuidString formats a UUID stored in network byte order, as ext, XFS
// and btrfs store theirs.
func uuidString(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
