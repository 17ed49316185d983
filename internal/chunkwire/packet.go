package chunkwire

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sizes fixed by Version 1 of the protocol.
const (
	// FragmentSize is the payload of one Data datagram but a content's last.
	FragmentSize = 1024
	// FragmentsPerChunk is how many fragments make a chunk; a Range's Mask
	// has one bit per fragment.
	FragmentsPerChunk = 32
	// ChunkSize is the unit an agent asks for and caches.
	ChunkSize = FragmentSize * FragmentsPerChunk

	// HeaderLen is the common header every datagram starts with.
	HeaderLen = 16
	// DataHeaderLen is a Data datagram without its payload.
	DataHeaderLen = HeaderLen + 16
	// MaxDataLen is the largest Data datagram.
	MaxDataLen = DataHeaderLen + FragmentSize
	// RequestHeaderLen is a Request datagram without its ranges.
	RequestHeaderLen = HeaderLen + 8
	// RangeLen is one range of a Request.
	RangeLen = 12
	// MaxRanges bounds the ranges of one Request, which keeps it within
	// the same 1280-byte budget as a Data datagram.
	MaxRanges = 96
	// AnnounceLen is the length of an Announce datagram.
	AnnounceLen = HeaderLen + 36

	// Version is the protocol version this package speaks.
	Version = 1
	// Magic opens every datagram.
	Magic = 0xBF4D
)

// AllFragments is the Mask that asks for every fragment of a chunk.
const AllFragments uint32 = 1<<FragmentsPerChunk - 1

// Type says which datagram follows the common header.
type Type uint8

// Datagram types.
const (
	TypeData     Type = 1
	TypeRequest  Type = 2
	TypeAnnounce Type = 3
)

func (t Type) String() string {
	switch t {
	case TypeData:
		return "DATA"
	case TypeRequest:
		return "REQUEST"
	case TypeAnnounce:
		return "ANNOUNCE"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Sentinel errors of the codec. Decoders wrap them with what was expected
// and what arrived; test with errors.Is.
var (
	// ErrShort means a datagram is shorter than its fixed layout.
	ErrShort = errors.New("chunkwire: datagram too short")
	// ErrBadMagic means the datagram is not of this protocol.
	ErrBadMagic = errors.New("chunkwire: bad magic")
	// ErrVersion means the sender speaks another version of the protocol.
	ErrVersion = errors.New("chunkwire: unsupported version")
	// ErrType means the datagram is not of the type the decoder reads.
	ErrType = errors.New("chunkwire: unexpected datagram type")
	// ErrChecksum means the CRC32C does not match: the datagram is corrupt.
	ErrChecksum = errors.New("chunkwire: checksum mismatch")
	// ErrMalformed means a field is out of its range or a length disagrees
	// with the datagram's size.
	ErrMalformed = errors.New("chunkwire: malformed datagram")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ContentID names a content on the wire: the first 8 bytes of its sha256.
type ContentID [8]byte

// ContentIDOf is the id of the content whose sha256 is sum.
func ContentIDOf(sum [sha256.Size]byte) ContentID {
	var id ContentID
	copy(id[:], sum[:])
	return id
}

// ParseContentID reads the id from a sha256 in hex (64 digits), as the
// image store names contents.
func ParseContentID(sha string) (ContentID, error) {
	var sum [sha256.Size]byte
	if len(sha) != 2*len(sum) {
		return ContentID{}, fmt.Errorf("%w: content sha256 has %d hex digits, want %d", ErrMalformed, len(sha), 2*len(sum))
	}
	if _, err := hex.Decode(sum[:], []byte(sha)); err != nil {
		return ContentID{}, fmt.Errorf("%w: content sha256 %q: %w", ErrMalformed, sha, err)
	}
	return ContentIDOf(sum), nil
}

func (c ContentID) String() string { return hex.EncodeToString(c[:]) }

// Chunks is how many chunks a content of size bytes has.
func Chunks(size int64) uint32 {
	return uint32((size + ChunkSize - 1) / ChunkSize)
}

// FragmentsOf is how many fragments chunk has in a content of size bytes:
// FragmentsPerChunk but in the last chunk, 0 past the end.
func FragmentsOf(chunk uint32, size int64) int {
	rest := size - int64(chunk)*ChunkSize
	switch {
	case rest <= 0:
		return 0
	case rest >= ChunkSize:
		return FragmentsPerChunk
	}
	return int((rest + FragmentSize - 1) / FragmentSize)
}

// Header is the common header of every datagram:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-------------------------------+---------------+---------------+
//	|         magic 0xBF4D          |  version (1)  |     type      |
//	+-------------------------------+---------------+---------------+
//	|        CRC32C of the datagram, this field left out            |
//	+---------------------------------------------------------------+
//	|                     content id (8 bytes)                      |
//	|                                                               |
//	+---------------------------------------------------------------+
//
// The encoders fill the CRC last, with Seal.
func appendHeader(dst []byte, t Type, id ContentID) []byte {
	dst = binary.BigEndian.AppendUint16(dst, Magic)
	dst = append(dst, Version, byte(t), 0, 0, 0, 0)
	return append(dst, id[:]...)
}

// checksum is the CRC32C of b without its CRC field (bytes 4 to 7).
func checksum(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:4])
	return crc32.Update(c, castagnoli, b[8:])
}

// Seal writes the CRC of the datagram b and returns b. The encoders call
// it; a test that edits a datagram calls it to make the CRC right again.
// b must hold at least a header.
func Seal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[4:8], checksum(b))
	return b
}

// Peek checks the common header and the CRC of b and says its type and
// content, so a receiver drops foreign and corrupt datagrams before it
// decodes them.
func Peek(b []byte) (Type, ContentID, error) {
	if len(b) < HeaderLen {
		return 0, ContentID{}, fmt.Errorf("%w: %d bytes, want at least a %d-byte header", ErrShort, len(b), HeaderLen)
	}
	if m := binary.BigEndian.Uint16(b); m != Magic {
		return 0, ContentID{}, fmt.Errorf("%w: got %#04x, want %#04x", ErrBadMagic, m, Magic)
	}
	if b[2] != Version {
		return 0, ContentID{}, fmt.Errorf("%w: got version %d, want %d", ErrVersion, b[2], Version)
	}
	if got, want := binary.BigEndian.Uint32(b[4:8]), checksum(b); got != want {
		return 0, ContentID{}, fmt.Errorf("%w: got CRC32C %#08x, computed %#08x", ErrChecksum, got, want)
	}
	var id ContentID
	copy(id[:], b[8:16])
	return Type(b[3]), id, nil
}

// open checks b's header as Peek does and that it is a datagram of type t.
func open(b []byte, t Type) (ContentID, error) {
	got, id, err := Peek(b)
	if err != nil {
		return id, err
	}
	if got != t {
		return id, fmt.Errorf("%w: got %v, want %v", ErrType, got, t)
	}
	return id, nil
}
