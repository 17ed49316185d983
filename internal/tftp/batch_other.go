//go:build !linux

package tftp

import (
	"fmt"
	"net"
)

// newDataWriter returns a writer that sends one datagram per system call:
// sendmmsg and UDP GSO are Linux-only.
func newDataWriter(c *net.UDPConn, maxPkts int, useGSO bool) (dataWriter, error) {
	return &plainWriter{conn: c}, nil
}

// plainWriter joins header and payload in a scratch buffer and writes it.
type plainWriter struct {
	conn *net.UDPConn
	buf  []byte
}

func (w *plainWriter) writeData(pkts []dataPacket) error {
	for i := range pkts {
		p := &pkts[i]
		w.buf = append(append(w.buf[:0], p.hdr[:]...), p.payload...)
		if _, err := w.conn.Write(w.buf); err != nil && !isTransient(err) {
			return fmt.Errorf("sending DATA: %w", err)
		}
	}
	return nil
}
