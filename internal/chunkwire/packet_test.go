package chunkwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

var testID = ContentIDOf(sha256.Sum256([]byte("debian-12 root")))

// refusal is one way to spoil a good datagram and the error it must get.
type refusal struct {
	name string
	edit func(b []byte) []byte // gets a copy of the good datagram; Seal(b) makes its CRC right again
	want error
}

// refuses checks that parse refuses every spoiled copy of good as wanted.
func refuses(t *testing.T, good []byte, parse func([]byte) error, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(tc.edit(append([]byte(nil), good...)))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDataRoundTrip(t *testing.T) {
	for _, d := range []Data{
		{Content: testID, Sender: 9, Seq: 0, Chunk: 0, Fragment: 0, Payload: bytes.Repeat([]byte{0xAA}, FragmentSize)},
		{Content: testID, Sender: 1<<32 - 1, Seq: 1<<32 - 1, Chunk: 1<<32 - 1, Fragment: FragmentsPerChunk - 1, Flags: FlagEnd, Payload: []byte{1}},
	} {
		b := d.Append(nil)
		if len(b) != DataHeaderLen+len(d.Payload) {
			t.Fatalf("Append: %d bytes, want %d", len(b), DataHeaderLen+len(d.Payload))
		}
		got, err := ParseData(b)
		if err != nil {
			t.Fatalf("ParseData(Append(%+v)): %v", d, err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("round trip: got %+v, want %+v", got, d)
		}
	}
}

func TestDataOffset(t *testing.T) {
	d := Data{Chunk: 3, Fragment: 5}
	if got, want := d.Offset(), int64(3*ChunkSize+5*FragmentSize); got != want {
		t.Fatalf("Offset: got %d, want %d", got, want)
	}
}

func TestParseDataRefuses(t *testing.T) {
	good := (&Data{Content: testID, Seq: 7, Chunk: 2, Fragment: 1, Payload: []byte("abcd")}).Append(nil)
	refuses(t, good, func(b []byte) error { _, err := ParseData(b); return err }, []refusal{
		{"empty", func([]byte) []byte { return nil }, ErrShort},
		{"header only", func(b []byte) []byte { return Seal(b[:HeaderLen]) }, ErrShort},
		{"magic", func(b []byte) []byte { b[0] = 'G'; return Seal(b) }, ErrBadMagic},
		{"version", func(b []byte) []byte { b[2] = 2; return Seal(b) }, ErrVersion},
		{"type", func(b []byte) []byte { b[3] = byte(TypeAnnounce); return Seal(b) }, ErrType},
		{"corrupt payload", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, ErrChecksum},
		{"corrupt crc", func(b []byte) []byte { b[5] ^= 0x80; return b }, ErrChecksum},
		{"fragment", func(b []byte) []byte { b[28] = FragmentsPerChunk; return Seal(b) }, ErrMalformed},
		{"flags", func(b []byte) []byte { b[29] = 2; return Seal(b) }, ErrMalformed},
		{"zero length", func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[30:], 0)
			return Seal(b[:DataHeaderLen])
		}, ErrMalformed},
		{"length past datagram", func(b []byte) []byte { binary.BigEndian.PutUint16(b[30:], 5); return Seal(b) }, ErrMalformed},
		{"too long", func(b []byte) []byte {
			b = append(b[:DataHeaderLen], make([]byte, FragmentSize+1)...)
			binary.BigEndian.PutUint16(b[30:], FragmentSize+1)
			return Seal(b)
		}, ErrMalformed},
	})
}

func TestRequestRoundTrip(t *testing.T) {
	full := make([]Range, MaxRanges)
	for i := range full {
		full[i] = Range{First: uint32(i * 10), Count: 3, Mask: AllFragments}
	}
	for _, r := range []Request{
		{Content: testID, Receiver: 42},
		{Content: testID, Receiver: 1, Flags: FlagRepair, Ranges: []Range{{First: 9, Count: 1, Mask: 1<<3 | 1<<17}}},
		{Content: testID, Receiver: 2, Ranges: []Range{{First: 1<<32 - 1, Count: 1, Mask: 1}}},
		{Content: testID, Receiver: 4, Flags: FlagReadAhead, Ranges: []Range{{First: 70, Count: 1, Mask: AllFragments}, {First: 12, Count: 3, Mask: AllFragments}}},
		{Content: testID, Receiver: 3, Ranges: full},
	} {
		b := r.Append(nil)
		got, err := ParseRequest(b, nil)
		if err != nil {
			t.Fatalf("ParseRequest(Append(%+v)): %v", r, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip: got %+v, want %+v", got, r)
		}
		if len(b) > 1280-48 {
			t.Fatalf("a request of %d ranges is %d bytes, past IPv6's minimum MTU", len(r.Ranges), len(b))
		}
	}
}

func TestParseRequestReusesRanges(t *testing.T) {
	b := (&Request{Content: testID, Ranges: []Range{{First: 1, Count: 2, Mask: 3}}}).Append(nil)
	buf := make([]Range, 0, 4)
	r, err := ParseRequest(b, buf)
	if err != nil {
		t.Fatal(err)
	}
	if &r.Ranges[:1][0] != &buf[:1][0] {
		t.Fatal("ParseRequest allocated ranges though the caller's slice had room")
	}
}

func TestParseRequestRefuses(t *testing.T) {
	good := (&Request{Content: testID, Receiver: 5, Ranges: []Range{{First: 4, Count: 2, Mask: AllFragments}}}).Append(nil)
	refuses(t, good, func(b []byte) error { _, err := ParseRequest(b, nil); return err }, []refusal{
		{"short", func(b []byte) []byte { return Seal(b[:RequestHeaderLen-1]) }, ErrShort},
		{"type", func(b []byte) []byte { b[3] = byte(TypeData); return Seal(b) }, ErrType},
		{"corrupt", func(b []byte) []byte { b[30] ^= 4; return b }, ErrChecksum},
		{"flags", func(b []byte) []byte { b[20] = 0x80; return Seal(b) }, ErrMalformed},
		{"unknown flag", func(b []byte) []byte { b[21] = 1 << 2; return Seal(b) }, ErrMalformed},
		{"too many ranges", func(b []byte) []byte {
			binary.BigEndian.PutUint16(b[22:], MaxRanges+1)
			return Seal(append(b, make([]byte, MaxRanges*RangeLen)...))
		}, ErrMalformed},
		{"count past datagram", func(b []byte) []byte { binary.BigEndian.PutUint16(b[22:], 2); return Seal(b) }, ErrMalformed},
		{"trailing bytes", func(b []byte) []byte { return Seal(append(b, 0)) }, ErrMalformed},
		{"empty range", func(b []byte) []byte { binary.BigEndian.PutUint32(b[28:], 0); return Seal(b) }, ErrMalformed},
		{"range wraps", func(b []byte) []byte { binary.BigEndian.PutUint32(b[24:], 1<<32-1); return Seal(b) }, ErrMalformed},
		{"empty mask", func(b []byte) []byte { binary.BigEndian.PutUint32(b[32:], 0); return Seal(b) }, ErrMalformed},
	})
}

func TestAnnounceRoundTrip(t *testing.T) {
	for _, a := range []Announce{
		{Content: testID, Size: 8 << 30, Sender: 0xbf, NextSeq: 99, Group: netip.MustParseAddrPort("239.1.2.3:10810")},
		{Content: testID, Size: 0, NextSeq: 0, Group: netip.MustParseAddrPort("[ff15::bf]:1")},
	} {
		b := a.Append(nil)
		if len(b) != AnnounceLen {
			t.Fatalf("Append: %d bytes, want %d", len(b), AnnounceLen)
		}
		got, err := ParseAnnounce(b)
		if err != nil {
			t.Fatalf("ParseAnnounce(Append(%+v)): %v", a, err)
		}
		if got != a {
			t.Fatalf("round trip: got %+v, want %+v", got, a)
		}
	}
}

func TestParseAnnounceRefuses(t *testing.T) {
	good := (&Announce{Content: testID, Size: 1 << 20, Group: netip.MustParseAddrPort("239.9.9.9:4000")}).Append(nil)
	refuses(t, good, func(b []byte) error { _, err := ParseAnnounce(b); return err }, []refusal{
		{"length", func(b []byte) []byte { return Seal(b[:AnnounceLen-1]) }, ErrMalformed},
		{"type", func(b []byte) []byte { b[3] = byte(TypeRequest); return Seal(b) }, ErrType},
		{"size", func(b []byte) []byte { b[16] = 0x80; return Seal(b) }, ErrMalformed},
		{"reserved", func(b []byte) []byte { b[35] = 1; return Seal(b) }, ErrMalformed},
		{"unicast group", func(b []byte) []byte { b[48] = 10; return Seal(b) }, ErrMalformed},
		{"no port", func(b []byte) []byte { b[32], b[33] = 0, 0; return Seal(b) }, ErrMalformed},
	})
}

func TestPeekTellsTypeAndContent(t *testing.T) {
	b := (&Request{Content: testID}).Append(nil)
	typ, id, err := Peek(b)
	if err != nil || typ != TypeRequest || id != testID {
		t.Fatalf("Peek: got %v %v %v, want %v %v nil", typ, id, err, TypeRequest, testID)
	}
}

func TestContentID(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	hexSum := "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
	id, err := ParseContentID(hexSum)
	if err != nil {
		t.Fatal(err)
	}
	if id != ContentIDOf(sum) || id.String() != hexSum[:16] {
		t.Fatalf("ParseContentID: got %v, want %v", id, ContentIDOf(sum))
	}
	for _, bad := range []string{"", hexSum[:62], "zz" + hexSum[2:]} {
		if _, err := ParseContentID(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseContentID(%q): got %v, want %v", bad, err, ErrMalformed)
		}
	}
}

func TestChunkArithmetic(t *testing.T) {
	for _, tc := range []struct {
		size   int64
		chunks uint32
		last   int // fragments of the last chunk
	}{
		{0, 0, 0},
		{1, 1, 1},
		{ChunkSize, 1, FragmentsPerChunk},
		{ChunkSize + FragmentSize + 1, 2, 2},
		{8 << 30, 1 << 18, FragmentsPerChunk},
	} {
		if got := Chunks(tc.size); got != tc.chunks {
			t.Errorf("Chunks(%d): got %d, want %d", tc.size, got, tc.chunks)
		}
		if tc.chunks > 0 {
			if got := FragmentsOf(tc.chunks-1, tc.size); got != tc.last {
				t.Errorf("FragmentsOf(last, %d): got %d, want %d", tc.size, got, tc.last)
			}
		}
		if got := FragmentsOf(tc.chunks, tc.size); got != 0 {
			t.Errorf("FragmentsOf(past end, %d): got %d, want 0", tc.size, got)
		}
	}
}
