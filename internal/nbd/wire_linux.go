package nbd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxIovecs is Linux's IOV_MAX.
const maxIovecs = 1024

// socketWire writes with sendmsg and sendfile on the socket itself. A
// READ's data that lies unchanged in a file (the base image) goes from
// the page cache to the socket without being copied through user space,
// and the header in front of it is sent with MSG_MORE so the two leave in
// the same segments.
type socketWire struct {
	rc  syscall.RawConn
	iov [][]byte
}

func newSocketWire(rc syscall.RawConn) wire { return &socketWire{rc: rc} }

func (*socketWire) sendsFiles() bool { return true }

func (w *socketWire) write(batch []reply) error {
	iov := w.iov[:0]
	for i := range batch {
		r := &batch[i]
		iov = append(iov, r.header())
		if len(r.body) > 0 {
			iov = append(iov, r.body)
		}
		if r.file == nil {
			continue
		}
		if err := w.sendmsg(iov, true); err != nil {
			return err
		}
		iov = iov[:0]
		if err := w.sendfile(r.file, r.fileOff, r.fileLen); err != nil {
			return err
		}
	}
	err := w.sendmsg(iov, false)
	clear(iov)
	w.iov = iov[:0]
	return err
}

// sendmsg writes all of bufs; more asks the kernel to hold a partial
// segment back for what follows.
func (w *socketWire) sendmsg(bufs [][]byte, more bool) error {
	flags := unix.MSG_NOSIGNAL
	if more {
		flags |= unix.MSG_MORE
	}
	for len(bufs) > 0 {
		var n int
		var serr error
		err := w.rc.Write(func(fd uintptr) bool {
			for {
				n, serr = unix.SendmsgBuffers(int(fd), bufs[:min(len(bufs), maxIovecs)], nil, nil, flags)
				if serr != unix.EINTR {
					return serr != unix.EAGAIN
				}
			}
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("send reply: %w", err)
		}
		bufs = advance(bufs, n)
	}
	return nil
}

// advance drops the first n bytes from bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}

// sendfile sends n bytes of f from off, waiting for room whenever the
// socket is full. The reply header has already gone out, so a failure here
// leaves the stream broken and ends the session.
func (w *socketWire) sendfile(f *os.File, off, n int64) error {
	var serr, werr error
	cerr := control(f, func(src uintptr) {
		werr = w.rc.Write(func(dst uintptr) bool {
			for n > 0 {
				m, err := unix.Sendfile(int(dst), int(src), &off, int(min(n, 1<<30)))
				n -= int64(max(m, 0))
				switch {
				case err == unix.EINTR:
				case err == unix.EAGAIN:
					return false
				case err != nil:
					serr = err
					return true
				case m == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than it was
					return true
				}
			}
			return true
		})
	})
	if err := errors.Join(cerr, werr, serr); err != nil {
		return fmt.Errorf("send read data from %s at %d (%d bytes left): %w", f.Name(), off, n, err)
	}
	return nil
}

// control runs fn on f's descriptor.
func control(f *os.File, fn func(fd uintptr)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(fn)
}
