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
// holds until its reply has left (or been dropped), and pooled says body
// goes back to the buffer pool then.
type reply struct {
	// The header is hdr[:hdrLen] (fixed-size headers, no allocation per
	// reply), or head when longer (error chunks with a message).
	hdr     [ChunkHeaderLen + offsetDataExtra]byte
	hdrLen  uint8
	head    []byte
	body    []byte
	pooled  bool
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
	if r.pooled {
		putBuf(r.body)
	}
	if r.weight > 0 {
		ss.budget.Release(r.weight)
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
	r.body, r.pooled = data, true
	ss.send(r)
}

// spanReply is the reply to a READ whose data need not be copied into a
// buffer: bytes the export has mapped, or a span of its file for
// sendfile. The mapping comes first where an export offers both: its one
// copy hands the client bytes in the CPU cache (MappedSpanner), and
// sendfile serves what it refuses.
func (ss *session) spanReply(req Request, weight int64) (reply, bool) {
	off, n := int64(req.Offset), int64(req.Length)
	if ss.mapped != nil {
		if b, ok := ss.mapped.MappedSpan(off, n); ok {
			r := ss.dataReply(req, int(n), weight)
			r.body = b
			return r, true
		}
	}
	if ss.files != nil {
		if f, foff, ok := ss.files.FileSpan(off, n); ok {
			r := ss.dataReply(req, int(n), weight)
			r.file, r.fileOff, r.fileLen = f, foff, n
			return r, true
		}
	}
	return reply{}, false
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
