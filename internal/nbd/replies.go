package nbd

import (
	"errors"
	"math/bits"
	"net"
	"os"
	"sync"
)

// reply is one message for the client: its header, then body, or then fileLen
// bytes of file from fileOff, sent with sendfile(2) straight from the page
// cache. weight is the share of the session's buffer budget the request
// holds until its reply has left (or been dropped), and buf goes back to
// the buffer pool then (it is body, or was lent to the Store for it).
type reply struct {
	// The header is hdr[:hdrLen] (fixed-size headers, no allocation per
	// reply), or head when longer (error chunks with a message).
	hdr     [ChunkHeaderLen + offsetDataExtra]byte
	hdrLen  uint8
	head    []byte
	body    []byte
	buf     []byte
	file    *os.File
	fileOff int64
	fileLen int64
	weight  int64
}

// replyQueue lets the request workers send without a writer goroutine:
// the first worker to find the socket idle becomes the writer and sends
// every reply queued meanwhile in one batch, in one system call where it
// can. Under load that turns tens of replies into one writev; when idle
// it costs one uncontended lock.
type replyQueue struct {
	mu      sync.Mutex
	queue   []reply
	spare   []reply
	writing bool  // someone has the writer's role
	held    bool  // the request loop has it and is not writing yet
	err     error // first write error; later replies are dropped
}

// send queues r and, unless another worker is writing or the request
// loop holds the queue, writes the queue until it is empty.
func (ss *session) send(r reply) {
	q := &ss.replies
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		ss.release(r)
		return
	}
	q.queue = append(q.queue, r)
	if q.writing {
		q.mu.Unlock()
		return
	}
	q.writing = true
	ss.drain()
}

// hold makes the caller the queue's writer, if nobody is, without writing
// yet: the request loop holds the queue while it answers the requests it
// has already read, then writes all their replies at once with flush. It
// must flush before anything that can block.
func (ss *session) hold() {
	q := &ss.replies
	q.mu.Lock()
	if !q.writing {
		q.writing, q.held = true, true
	}
	q.mu.Unlock()
}

// flush writes what hold kept back.
func (ss *session) flush() {
	q := &ss.replies
	q.mu.Lock()
	if !q.held {
		q.mu.Unlock()
		return
	}
	q.held = false
	ss.drain()
}

// drain writes the queue until it is empty, then gives up the writer's
// role; it is called with q.mu held and the role taken, and unlocks.
func (ss *session) drain() {
	q := &ss.replies
	for len(q.queue) > 0 {
		batch := q.queue
		q.queue = q.spare[:0]
		q.mu.Unlock()
		var err error
		if q.err == nil {
			err = ss.out.write(batch)
		}
		for i := range batch {
			ss.release(batch[i])
			batch[i] = reply{}
		}
		q.mu.Lock()
		q.spare = batch[:0]
		if err != nil && q.err == nil {
			q.err = err
			// Wake the reader so the session ends instead of reading
			// requests it can no longer answer.
			ss.conn.Close()
			if !errors.Is(err, net.ErrClosed) {
				ss.log.Info("nbd reply failed; closing", "err", err)
			}
		}
	}
	q.writing = false
	q.mu.Unlock()
}

// header returns the bytes in front of the body.
func (r *reply) header() []byte {
	if r.head != nil {
		return r.head
	}
	return r.hdr[:r.hdrLen]
}

// setHeader records that the header was appended into r.hdr.
func (r *reply) setHeader(h []byte) { r.hdrLen = uint8(len(h)) }

func (ss *session) release(r reply) {
	putBuf(r.buf)
	if r.weight > 0 {
		ss.budget.release(r.weight)
	}
}

func (ss *session) replyOK(req Request, weight int64) {
	r := reply{weight: weight}
	r.setHeader(AppendSimpleReply(r.hdr[:0], req.Handle, 0))
	ss.send(r)
}

// dataReply is a successful READ's reply for n bytes, without the bytes.
func (ss *session) dataReply(req Request, n int, weight int64) reply {
	r := reply{weight: weight}
	if ss.structured {
		r.setHeader(AppendOffsetDataHeader(r.hdr[:0], req.Handle, req.Offset, uint32(n), true))
	} else {
		r.setHeader(AppendSimpleReply(r.hdr[:0], req.Handle, 0))
	}
	return r
}

// replyData sends a READ's data from a pooled buffer, which the reply
// owns from here on.
func (ss *session) replyData(req Request, data []byte, weight int64) {
	if ss.structured && len(data) == 0 { // OFFSET_DATA must carry at least one byte
		putBuf(data)
		r := reply{weight: weight}
		r.setHeader(AppendNoneChunk(r.hdr[:0], req.Handle))
		ss.send(r)
		return
	}
	r := ss.dataReply(req, len(data), weight)
	r.body, r.buf = data, data
	ss.send(r)
}

// replySpan sends a READ's data as the Store answered it; buf is the
// buffer the Store was given, which the reply owns from here on. A span
// that is not the READ's length would desynchronise the stream, so it is
// answered with EIO.
func (ss *session) replySpan(req Request, buf []byte, s Span, weight int64) {
	n := int(req.Length)
	if s.File == nil && len(s.Bytes) != n {
		putBuf(buf)
		ss.log.Error("nbd store answered a READ with the wrong length", "offset", req.Offset, "length", n, "got", len(s.Bytes))
		ss.replyError(req, EIO, "READ failed: EIO", weight)
		return
	}
	ss.bytesRead.Add(int64(n))
	r := ss.dataReply(req, n, weight)
	r.buf = buf
	if s.File != nil {
		r.file, r.fileOff, r.fileLen = s.File, s.FileOff, int64(n)
	} else {
		r.body = s.Bytes
	}
	ss.send(r)
}

// replyError sends an error. With structured replies it carries msg for the
// client's user; a simple READ error reply carries no data, as proto.md
// requires when the server keeps the connection.
func (ss *session) replyError(req Request, e Errno, msg string, weight int64) {
	if ss.structured {
		ss.send(reply{head: AppendErrorChunk(nil, req.Handle, e, msg), weight: weight})
		return
	}
	ss.send(reply{head: AppendSimpleReply(nil, req.Handle, e), weight: weight})
}

// Data buffers come from one pool per power-of-two size from 4 KiB to
// MaxPayload, so a client's usual request size is recycled instead of
// allocated and cleared per request.
const (
	minPoolShift = 12
	maxPoolShift = 25 // MaxPayload
)

var bufPools [maxPoolShift - minPoolShift + 1]sync.Pool

func poolIndex(n int) int {
	if n <= 1<<minPoolShift {
		return 0
	}
	return bits.Len(uint(n-1)) - minPoolShift
}

func getBuf(n int) []byte {
	if n > MaxPayload {
		return make([]byte, n)
	}
	i := poolIndex(n)
	if b, ok := bufPools[i].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<(i+minPoolShift))
}

func putBuf(b []byte) {
	c := cap(b)
	if c < 1<<minPoolShift || c > MaxPayload || c&(c-1) != 0 {
		return
	}
	b = b[:c]
	bufPools[poolIndex(c)].Put(&b)
}
