package nbd

import (
	"fmt"
	"net"
	"syscall"
)

// wire writes batches of replies to the client's connection.
type wire interface {
	write(batch []reply) error
	// sendsFiles is true when replies may carry file spans.
	sendsFiles() bool
}

// newWire picks the fastest way to write to conn: system calls on the
// socket where the platform has them (one sendmsg per batch, sendfile for
// file spans), else net.Buffers.
func newWire(conn net.Conn) wire {
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			if w := newSocketWire(rc); w != nil {
				return w
			}
		}
	}
	return bufferWire{conn}
}

// bufferWire is the portable wire. It never gets file spans.
type bufferWire struct{ conn net.Conn }

func (bufferWire) sendsFiles() bool { return false }

func (w bufferWire) write(batch []reply) error {
	nb := make(net.Buffers, 0, 2*len(batch))
	for i := range batch {
		r := &batch[i]
		if r.file != nil {
			return fmt.Errorf("nbd: internal error: file span on a connection without sendfile")
		}
		nb = append(nb, r.header())
		if len(r.body) > 0 {
			nb = append(nb, r.body)
		}
	}
	_, err := nb.WriteTo(w.conn)
	return err
}
