package nbd

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// A READ of the immutable base image that must wait for the disk is read
// by a worker with splice(2) into a pipe: the worker waits for the disk,
// the pipe then holds references to the page-cache pages, and the writer
// splices them into the socket. The server copies no byte of it, where
// pread then send copied each byte twice; on a cold image, with the
// client and the server sharing two CPUs, those copies were what kept
// one reader behind the disk.

// pipe is one kernel pipe that carries a READ's pages from the file to
// the socket; held counts the bytes in it.
type pipe struct {
	r, w int
	size int
	held int
}

// pipePool is a session's pipes, at most the number init gave. A pipe is
// reused only when empty; one left holding bytes (a send failed) is
// closed. When every pipe carries a reply still waiting for the socket,
// get waits for one to come back rather than read into a buffer: with 50
// clients reading at once, replies queued behind full sockets had taken
// the pipes, and the reads that found none took 250 MB of buffers, which
// the heap then kept.
type pipePool struct {
	mu    sync.Mutex
	idle  []*pipe
	slots chan struct{} // a token per pipe in use
}

func (pp *pipePool) init(max int) { pp.slots = make(chan struct{}, max) }

// get returns a pipe that can hold n bytes, or nil when the system gives
// none.
func (pp *pipePool) get(n int) *pipe {
	pp.slots <- struct{}{}
	pp.mu.Lock()
	var p *pipe
	if k := len(pp.idle); k > 0 {
		p, pp.idle = pp.idle[k-1], pp.idle[:k-1]
	}
	pp.mu.Unlock()
	if p == nil {
		var fds [2]int
		if unix.Pipe2(fds[:], unix.O_CLOEXEC) != nil {
			<-pp.slots
			return nil
		}
		p = &pipe{r: fds[0], w: fds[1]}
		if sz, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0); err == nil {
			p.size = sz
		}
	}
	if p.size < n {
		sz, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, n)
		if err != nil {
			pp.put(p)
			return nil
		}
		p.size = sz
	}
	return p
}

// put gives back a pipe get returned.
func (pp *pipePool) put(p *pipe) {
	if p.held != 0 {
		pp.drop(p)
		return
	}
	pp.mu.Lock()
	pp.idle = append(pp.idle, p)
	pp.mu.Unlock()
	<-pp.slots
}

// drop closes a pipe get returned and frees its place.
func (pp *pipePool) drop(p *pipe) {
	unix.Close(p.r)
	unix.Close(p.w)
	<-pp.slots
}

// close closes the idle pipes; the session calls it once every reply has
// been released.
func (pp *pipePool) close() {
	pp.mu.Lock()
	idle := pp.idle
	pp.idle = nil
	pp.mu.Unlock()
	for _, p := range idle {
		unix.Close(p.r)
		unix.Close(p.w)
	}
}

// fill splices n bytes of f from off into p, waiting for the disk as a
// read would.
func (p *pipe) fill(f *os.File, off int64, n int) error {
	var serr error
	cerr := control(f, func(fd uintptr) {
		for n > 0 {
			m, err := unix.Splice(int(fd), &off, p.w, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				serr = err
				return
			case m == 0:
				serr = errors.New("unexpected end of file")
				return
			}
			p.held += int(m)
			n -= int(m)
		}
	})
	if err := errors.Join(cerr, serr); err != nil {
		return fmt.Errorf("splice %s at %d into a pipe: %w", f.Name(), off, err)
	}
	return nil
}

// splicedRead answers a READ from span (spliceable's) through a pipe, if
// a pipe can hold it.
func (ss *session) splicedRead(req Request, span storedSpan, weight int64) (reply, bool) {
	if span.f == nil {
		return reply{}, false
	}
	n := int(req.Length)
	p := ss.pipes.get(pipeBytes(span.off, n))
	if p == nil {
		return reply{}, false
	}
	if err := p.fill(span.f, span.off, n); err != nil {
		ss.pipes.drop(p) // ReadAt then reports the error, if it is one
		return reply{}, false
	}
	r := ss.dataReply(req, n, weight)
	r.pipe, r.pipeLen = p, n
	return r, true
}

const (
	pageSize  = 4096
	maxSplice = 1 << 20 // Linux's default pipe-max-size
)

// pipeBytes is the pipe size that n bytes of a file from off need: whole
// pages, one more when off is not on a page boundary.
func pipeBytes(off int64, n int) int {
	if off%pageSize != 0 {
		return n + pageSize
	}
	return n
}

// splice sends the n bytes p holds to the socket.
func (w *socketWire) splice(p *pipe, n int) error {
	left, err := w.pour(int64(n), func(dst int, k int64) (int, error) {
		m, err := unix.Splice(p.r, nil, dst, nil, int(k), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		p.held -= int(max(m, 0))
		return int(m), err
	})
	if err != nil {
		return fmt.Errorf("send read data from a pipe (%d bytes left): %w", left, err)
	}
	return nil
}

// spliceable returns where a worker can splice the READ's data from into
// a pipe.
func (ss *session) spliceable(req Request) (storedSpan, bool) {
	if ss.spans == nil || req.Length < minSendfile || req.Length > maxSplice {
		return storedSpan{}, false
	}
	f, off, ok := ss.spans.StoredSpan(int64(req.Offset), int64(req.Length))
	if !ok || pipeBytes(off, int(req.Length)) > maxSplice {
		return storedSpan{}, false // a pipe of more than pipe-max-size needs CAP_SYS_RESOURCE
	}
	return storedSpan{f, off}, true
}
