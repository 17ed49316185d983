package chunkwire

import (
	"bytes"
	"github.com/bootfleet/bootfleet/internal/testutil"
	"net/netip"
	"testing"
)

// The seeds of each target are in testdata/fuzz/TARGET, written from
// seedDatagrams by UPDATE_TESTDATA=1 go test -run TestWriteSeeds.

// bothWays runs check on b and on b with its CRC made right: a fuzzer
// almost never hits a matching CRC32C, and the decoding behind it is what
// needs the exploring.
func bothWays(b []byte, check func(b []byte)) {
	check(b)
	if len(b) >= HeaderLen {
		check(Seal(append([]byte(nil), b...)))
	}
}

// FuzzParseData: any datagram either decodes into a Data whose fields are
// in range and which re-encodes to the same bytes, or is refused.
func FuzzParseData(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		bothWays(in, func(b []byte) {
			d, err := ParseData(b)
			if err != nil {
				return
			}
			if d.Fragment >= FragmentsPerChunk || len(d.Payload) == 0 || len(d.Payload) > FragmentSize {
				t.Fatalf("ParseData accepted %+v", d)
			}
			if back := d.Append(nil); !bytes.Equal(back, b) {
				t.Fatalf("re-encoded %x, decoded from %x", back, b)
			}
		})
	})
}

// FuzzParseRequest: any datagram either decodes into a Request whose
// ranges are non-empty, do not wrap and ask for some fragment, and which
// re-encodes to the same bytes, or is refused.
func FuzzParseRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		bothWays(in, func(b []byte) {
			r, err := ParseRequest(b, nil)
			if err != nil {
				return
			}
			if len(r.Ranges) > MaxRanges {
				t.Fatalf("ParseRequest accepted %d ranges", len(r.Ranges))
			}
			for _, g := range r.Ranges {
				if g.Count == 0 || g.Mask == 0 || g.Last() < g.First {
					t.Fatalf("ParseRequest accepted range %+v", g)
				}
			}
			if back := r.Append(nil); !bytes.Equal(back, b) {
				t.Fatalf("re-encoded %x, decoded from %x", back, b)
			}
		})
	})
}

// FuzzParseAnnounce: any datagram either decodes into an Announce with a
// multicast group and a size in range, which re-encodes to the same bytes,
// or is refused.
func FuzzParseAnnounce(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		bothWays(in, func(b []byte) {
			a, err := ParseAnnounce(b)
			if err != nil {
				return
			}
			if !a.Group.Addr().IsMulticast() || a.Group.Port() == 0 || a.Size < 0 {
				t.Fatalf("ParseAnnounce accepted %+v", a)
			}
			if back := a.Append(nil); !bytes.Equal(back, b) {
				t.Fatalf("re-encoded %x, decoded from %x", back, b)
			}
		})
	})
}

// seedDatagrams are the seeds per target: valid datagrams of every shape,
// and a few near misses the decoder must refuse.
func seedDatagrams() map[string]map[string][]byte {
	data := (&Data{Content: testID, Sender: 0x5eed, Seq: 12, Chunk: 300, Fragment: 31, Flags: FlagEnd, Payload: bytes.Repeat([]byte("root"), 256)}).Append(nil)
	short := (&Data{Content: testID, Seq: 1<<32 - 1, Chunk: 0, Fragment: 0, Payload: []byte{0}}).Append(nil)
	badCRC := append([]byte(nil), short...)
	badCRC[4] ^= 1
	hello := (&Request{Content: testID, Receiver: 0xdeadbeef}).Append(nil)
	repair := (&Request{Content: testID, Receiver: 7, Flags: FlagRepair, Ranges: []Range{{First: 5, Count: 1, Mask: 0x00010008}}}).Append(nil)
	readAhead := (&Request{Content: testID, Receiver: 7, Ranges: []Range{{First: 0, Count: 4, Mask: AllFragments}, {First: 90, Count: 32, Mask: AllFragments}}}).Append(nil)
	flagged := (&Request{Content: testID, Receiver: 7, Flags: FlagReadAhead, Ranges: []Range{{First: 33, Count: 1, Mask: AllFragments}, {First: 8, Count: 2, Mask: AllFragments}}}).Append(nil)
	v4 := (&Announce{Content: testID, Size: 2 << 30, Sender: 0x5eed, NextSeq: 1000, Group: netip.MustParseAddrPort("239.77.1.9:10810")}).Append(nil)
	v6 := (&Announce{Content: testID, Size: 123457, Group: netip.MustParseAddrPort("[ff15::1:bf]:10810")}).Append(nil)
	return map[string]map[string][]byte{
		"FuzzParseData":     {"full-fragment-end": data, "one-byte": short, "bad-crc": badCRC, "request-not-data": hello},
		"FuzzParseRequest":  {"hello": hello, "repair": repair, "read-ahead": readAhead, "flagged-read-ahead": flagged, "truncated": readAhead[:len(readAhead)-3]},
		"FuzzParseAnnounce": {"ipv4": v4, "ipv6": v6, "data-not-announce": short},
	}
}

// TestWriteSeeds writes the seed corpus under UPDATE_TESTDATA=1 and
// otherwise checks that the committed corpus holds every seed, so a change
// of the wire format cannot leave the fuzzers starting from stale bytes.
func TestWriteSeeds(t *testing.T) {
	for target, seeds := range seedDatagrams() {
		testutil.FuzzSeeds(t, target, seeds)
	}
}
