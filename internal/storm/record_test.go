package storm

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"testing"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// clientStream is what an NBD client sends: flags, OPT_GO, then reads
// with a write among them.
func clientStream(reads []Read) []byte {
	b := []byte{0, 0, 0, 3}
	b = nbd.AppendOption(b, nbd.OptStructuredReply, nil)
	b = nbd.AppendOption(b, nbd.OptGo, nbd.AppendInfoRequest(nil, nbd.InfoRequest{Name: "m-02-bf-57-00-00-01-secret"}))
	for i, r := range reads {
		b = nbd.AppendRequest(b, nbd.Request{Type: nbd.CmdRead, Handle: uint64(i), Offset: r.Offset, Length: r.Length})
		if i == 1 {
			b = nbd.AppendRequest(b, nbd.Request{Type: nbd.CmdWrite, Handle: 99, Offset: 0, Length: 5000})
			b = append(b, make([]byte, 5000)...)
			b = nbd.AppendRequest(b, nbd.Request{Type: nbd.CmdFlush, Handle: 100})
		}
	}
	return append(b, nbd.AppendRequest(nil, nbd.Request{Type: nbd.CmdDisc, Handle: 101})...)
}

var sampleReads = []Read{{0, 4096}, {1 << 20, 131072}, {8192, 512}, {1 << 33, 32 << 20}}

func TestRequestScanner(t *testing.T) {
	stream := clientStream(sampleReads)
	for _, chunk := range []int{1, 3, 28, 4096, len(stream)} {
		t.Run("chunks of "+strconv.Itoa(chunk), func(t *testing.T) {
			var got []Read
			s := &requestScanner{onRead: func(r Read) { got = append(got, r) }}
			for p := stream; len(p) > 0; {
				n := min(chunk, len(p))
				if _, err := s.Write(p[:n]); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
			if !reflect.DeepEqual(got, sampleReads) || s.writes != 1 {
				t.Fatalf("got %v and %d writes, want %v and 1", got, s.writes, sampleReads)
			}
		})
	}
	t.Run("garbage after the options", func(t *testing.T) {
		s := &requestScanner{onRead: func(Read) {}}
		b := append([]byte{0, 0, 0, 1}, []byte("GET / HTTP/1.1\r\n\r\n")...)
		if _, err := s.Write(b); !errors.Is(err, ErrNBDStream) {
			t.Fatalf("err = %v, want ErrNBDStream", err)
		}
		if _, err := s.Write([]byte{1}); !errors.Is(err, ErrNBDStream) {
			t.Fatalf("a later write: err = %v, want the same error", err)
		}
	})
}

func FuzzRequestScanner(f *testing.F) {
	f.Add(clientStream(sampleReads), uint8(7))
	f.Add([]byte{0, 0, 0, 1, 0x25, 0x60, 0x95, 0x13}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		var whole, pieces []Read
		s1 := &requestScanner{onRead: func(r Read) { whole = append(whole, r) }}
		err1 := func() error { _, err := s1.Write(b); return err }()
		s2 := &requestScanner{onRead: func(r Read) { pieces = append(pieces, r) }}
		var err2 error
		for p := b; len(p) > 0 && err2 == nil; {
			n := min(int(chunk)+1, len(p))
			_, err2 = s2.Write(p[:n])
			p = p[n:]
		}
		if (err1 == nil) != (err2 == nil) || !reflect.DeepEqual(whole, pieces) {
			t.Fatalf("fed whole: %v %v; in pieces of %d: %v %v", whole, err1, int(chunk)+1, pieces, err2)
		}
	})
}

// segment builds a captured TCP segment.
func segment(seq uint32, flags byte, payload []byte) []byte {
	tcp := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(tcp, 40000)
	binary.BigEndian.PutUint16(tcp[2:], 10809)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = flags
	tcp = append(tcp, payload...)
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, protoTCP, 0, 0, 10, 0, 0, 100, 10, 0, 0, 1}
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)+len(tcp)))
	return append(ip, tcp...)
}

// TestTCPStreamReorders sends the client stream as segments out of order,
// duplicated and overlapping, as a capture can see them, and expects the
// reads back in the order sent.
func TestTCPStreamReorders(t *testing.T) {
	stream := clientStream(sampleReads)
	const isn = 0xfffff000 // the sequence numbers wrap inside the stream
	type seg struct {
		seq uint32
		p   []byte
	}
	var segs []seg
	for off := 0; off < len(stream); off += 100 {
		segs = append(segs, seg{isn + 1 + uint32(off), stream[off:min(off+100, len(stream))]})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shuffled := append([]seg(nil), segs...)
	for i := range shuffled { // swap neighbours: reordered, never far
		if j := i + 1 + rng.IntN(3); j < len(shuffled) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		}
	}
	// A retransmission that overlaps two segments, and a duplicate.
	shuffled = append(shuffled, seg{isn + 1 + 50, stream[50:250]}, segs[3])

	var got []Read
	sc := &requestScanner{onRead: func(r Read) { got = append(got, r) }}
	syn, err := ParseTCP4(segment(isn, 0x02, nil))
	if err != nil || !syn.SYN || syn.Src != netip.MustParseAddrPort("10.0.0.100:40000") || syn.Dst.Port() != 10809 {
		t.Fatalf("SYN parsed as %+v, %v", syn, err)
	}
	st := newTCPStream(syn.Seq, func(p []byte) error { _, err := sc.Write(p); return err })
	for _, s := range shuffled {
		p, err := ParseTCP4(segment(s.seq, 0x18, s.p))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.add(p.Seq, p.Payload); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, sampleReads) || st.held != 0 {
		t.Fatalf("got %v (%d bytes still held), want %v", got, st.held, sampleReads)
	}
}

func TestTCPStreamGapTooLong(t *testing.T) {
	st := newTCPStream(0, func([]byte) error { return nil })
	big := make([]byte, 64<<10)
	var err error
	for i := uint32(1); err == nil && i < 1000; i++ {
		err = st.add(1000+i*uint32(len(big)), big) // byte 1 never comes
	}
	if err == nil {
		t.Fatal("a gap that is never filled must end the stream once too much waits behind it")
	}
}

func FuzzParseTCP4(f *testing.F) {
	f.Add(segment(1, 0x18, []byte("payload")))
	f.Add(segment(0, 0x02, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseTCP4(b)
		if err != nil {
			return
		}
		if len(s.Payload) > len(b) {
			t.Fatalf("payload of %d bytes from %d", len(s.Payload), len(b))
		}
	})
}
