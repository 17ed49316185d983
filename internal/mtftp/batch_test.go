package mtftp

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// countingReader counts the reads fillBatch makes.
type countingReader struct {
	*bytes.Reader
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.Reader.ReadAt(p, off)
}

// TestFillBatch: the DATA packets of a batch carry each block's bytes,
// the short or empty last block included, across a cycle's wrap, with one
// read per run of consecutive blocks.
func TestFillBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		blocks []int
		reads  int
	}{
		{"one run", 5*BlockSize + 100, []int{1, 2, 3}, 1},
		{"wraps at the short last block", 5*BlockSize + 100, []int{5, 6, 1, 2}, 2},
		{"ends with the empty block", 3 * BlockSize, []int{3, 4, 1}, 2},
		{"a master's gap in the middle", 8 * BlockSize, []int{2, 3, 7, 8, 9}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := make([]byte, tc.size)
			for i := range file {
				file[i] = byte(i * 7 / BlockSize)
			}
			r := &countingReader{Reader: bytes.NewReader(file)}
			conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			b := mcast.NewBatch(conn, sendBatch, 4+BlockSize)
			if err := fillBatch(b, r, make([]byte, sendBatch*BlockSize), tc.blocks); err != nil {
				t.Fatal(err)
			}
			if b.Len() != len(tc.blocks) || r.reads != tc.reads {
				t.Fatalf("%d packets from %d reads, want %d from %d", b.Len(), r.reads, len(tc.blocks), tc.reads)
			}
			var got []string
			b.Send(conn.LocalAddr().(*net.UDPAddr), func(int, uint64, error) {})
			buf := make([]byte, 2048)
			for range tc.blocks {
				n, _, err := conn.ReadFromUDP(buf)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(buf[:n]))
			}
			for i, block := range tc.blocks {
				want, err := dataPacket(bytes.NewReader(file), make([]byte, 4+BlockSize), block)
				if err != nil {
					t.Fatal(err)
				}
				if got[i] != string(want) {
					p, _ := tftp.ParsePacket([]byte(got[i]))
					t.Errorf("packet %d: %s, want DATA %d of %d bytes", i, describe(p), block, len(want)-4)
				}
			}
		})
	}
}

func describe(p tftp.Packet) string {
	if d, ok := p.(*tftp.Data); ok {
		return fmt.Sprintf("DATA %d of %d bytes", d.Block, len(d.Payload))
	}
	return fmt.Sprintf("%T", p)
}
