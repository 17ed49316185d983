package nbd

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// Wire bytes below are written out by hand from proto.md, not produced by
// the code under test.
func TestEncodings(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"greeting", AppendGreeting(nil, FlagFixedNewstyle|FlagNoZeroes), "4e42444d41474943 49484156454f5054 0003"},
		{"option", AppendOption(nil, OptGo, []byte{1, 2}), "49484156454f5054 00000007 00000002 0102"},
		{"option reply", AppendOptionReply(nil, OptList, RepErrUnsup, []byte("x")), "0003e889045565a9 00000003 80000001 00000001 78"},
		{"export name reply", AppendExportNameReply(nil, 1<<20, FlagHasFlags|FlagReadOnly, true), "0000000000100000 0003"},
		{"info request", AppendInfoRequest(nil, InfoRequest{Name: "ab", Infos: []InfoType{InfoBlockSize}}), "00000002 6162 0001 0003"},
		{"info export", AppendInfo(nil, Info{Type: InfoExport, Size: 512, Flags: FlagHasFlags}), "0000 0000000000000200 0001"},
		{"info block size", AppendInfo(nil, Info{Type: InfoBlockSize, MinBlock: 1, PreferredBlock: 4096, MaxBlock: 1 << 25}), "0003 00000001 00001000 02000000"},
		{"info name", AppendInfo(nil, Info{Type: InfoName, Text: "ab"}), "0001 6162"},
		{"server reply", AppendServerReply(nil, "ab", ""), "00000002 6162"},
		{"request", AppendRequest(nil, Request{Flags: CmdFlagFUA, Type: CmdWrite, Handle: 0x0102030405060708, Offset: 4096, Length: 512}),
			"25609513 0001 0001 0102030405060708 0000000000001000 00000200"},
		{"simple reply", AppendSimpleReply(nil, 9, EPERM), "67446698 00000001 0000000000000009"},
		{"offset data", AppendOffsetDataHeader(nil, 9, 4096, 3, true), "668e33ef 0001 0001 0000000000000009 0000000b 0000000000001000"},
		{"none chunk", AppendNoneChunk(nil, 9), "668e33ef 0001 0000 0000000000000009 00000000"},
		{"error chunk", AppendErrorChunk(nil, 9, EINVAL, "no"), "668e33ef 0001 8001 0000000000000009 00000008 00000016 0002 6e6f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want := unhex(tc.want); !bytes.Equal(tc.got, want) {
				t.Fatalf("got  %x\nwant %x", tc.got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"greeting short", err1(ParseGreeting([]byte{1})), ErrShort},
		{"greeting oldstyle", err1(ParseGreeting(unhex("4e42444d41474943 0000420281861253 0000"))), ErrBadMagic},
		{"client flags unknown", err1(ParseClientFlags(unhex("00000004"), offeredFlags)), ErrClientFlags},
		{"client no zeroes not offered", err1(ParseClientFlags(unhex("00000002"), FlagFixedNewstyle)), ErrClientFlags},
		{"option magic", err1(ParseOptionHeader(bytes.Repeat([]byte{0}, 16))), ErrBadMagic},
		{"option short", err1(ParseOptionHeader(make([]byte, 15))), ErrShort},
		{"info request short", err1(ParseInfoRequest(unhex("0000000000"))), ErrOptionData},
		{"info request name too long", err1(ParseInfoRequest(unhex("00000005 6162 0000"))), ErrOptionData},
		{"info request count mismatch", err1(ParseInfoRequest(unhex("00000000 0002 0001"))), ErrOptionData},
		{"info request NUL in name", err1(ParseInfoRequest(unhex("00000001 00 0000"))), ErrOptionData},
		{"export name invalid UTF-8", err1(ParseExportName([]byte{0xff})), ErrOptionData},
		{"export name too long", err1(ParseExportName(make([]byte, MaxStringLen+1))), ErrOptionData},
		{"request magic", err1(ParseRequest(make([]byte, RequestLen))), ErrBadMagic},
		{"request short", err1(ParseRequest(unhex("25609513"))), ErrShort},
		{"info export wrong length", err1(ParseInfo(unhex("0000 00"))), ErrReplyData},
		{"server reply overflow", err3(ParseServerReply(unhex("00000009 61"))), ErrReplyData},
		{"error chunk zero", err3(ParseErrorChunk(unhex("00000000 0000"))), ErrReplyData},
		{"error chunk message overflow", err3(ParseErrorChunk(unhex("00000005 0009 61"))), ErrReplyData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("got %v, want %v", tc.err, tc.want)
			}
			if !strings.Contains(tc.err.Error(), "want") {
				t.Errorf("error %q does not say what was wanted", tc.err)
			}
		})
	}
}

func err1[T any](_ T, err error) error         { return err }
func err3[A, B any](_ A, _ B, err error) error { return err }

func TestParseRoundTrips(t *testing.T) {
	r := Request{Flags: CmdFlagNoHole, Type: CmdWriteZeroes, Handle: 77, Offset: 1 << 40, Length: 1 << 20}
	if got, err := ParseRequest(AppendRequest(nil, r)); err != nil || got != r {
		t.Fatalf("request round trip: got %+v, %v", got, err)
	}
	ir := InfoRequest{Name: "machine-1/secret", Infos: []InfoType{InfoName, InfoBlockSize}}
	if got, err := ParseInfoRequest(AppendInfoRequest(nil, ir)); err != nil || !reflect.DeepEqual(got, ir) {
		t.Fatalf("info request round trip: got %+v, %v", got, err)
	}
	for _, in := range []Info{
		{Type: InfoExport, Size: 5, Flags: FlagHasFlags},
		{Type: InfoBlockSize, MinBlock: 512, PreferredBlock: 4096, MaxBlock: 1 << 20},
		{Type: InfoDescription, Text: "x"},
	} {
		if got, err := ParseInfo(AppendInfo(nil, in)); err != nil || got != in {
			t.Fatalf("info round trip: got %+v, %v, want %+v", got, err, in)
		}
	}
	e, msg, err := ParseErrorChunk(AppendErrorChunk(nil, 1, ENOSPC, "full")[ChunkHeaderLen:])
	if err != nil || e != ENOSPC || msg != "full" {
		t.Fatalf("error chunk round trip: %v %q %v", e, msg, err)
	}
}

func TestBlockSizes(t *testing.T) {
	for _, tc := range []struct {
		in, want [3]uint32
	}{
		{[3]uint32{0, 0, 0}, [3]uint32{1, 4096, MaxPayload}}, // defaults
		{[3]uint32{512, 4096, 1 << 20}, [3]uint32{512, 4096, 1 << 20}},
		{[3]uint32{3, 100, 0}, [3]uint32{1, 4096, MaxPayload}},             // nonsense falls back
		{[3]uint32{4096, 512, 1 << 30}, [3]uint32{4096, 4096, MaxPayload}}, // clamped
	} {
		minB, prefB, maxB := blockSizes(ExportInfo{MinBlock: tc.in[0], PreferredBlock: tc.in[1], MaxBlock: tc.in[2]})
		if [3]uint32{minB, prefB, maxB} != tc.want {
			t.Errorf("blockSizes(%v) = %v, want %v", tc.in, [3]uint32{minB, prefB, maxB}, tc.want)
		}
	}
}
