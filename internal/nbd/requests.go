package nbd

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// transmit is the request loop. One goroutine reads requests in order (a
// WRITE's payload must be consumed before the next header) and hands them
// to up to MaxInFlight workers, started as load needs them and kept for the
// session, so a request costs a channel hand-off instead of a new
// goroutine with a stack to grow. Replies go out in completion order,
// which proto.md allows. Every request holds a share of MaxBufferBytes
// from before its payload is read until its reply has been written, so a
// client that sends without reading replies stalls instead of making the
// server buffer without bound.
func (ss *session) transmit(ctx context.Context) error {
	ss.budget = semaphore.NewWeighted(ss.srv.cfg.MaxBufferBytes)
	ss.out = newWire(ss.conn)
	if fs, ok := ss.export.(FileSpanner); ok && ss.out.sendsFiles() {
		ss.files = fs
	}
	ss.loader, _ = ss.export.(LoadingSpanner)
	ss.mapped, _ = ss.export.(MappedSpanner)
	ss.cached, _ = ss.export.(CachedReader)
	ss.cachedW, _ = ss.export.(CachedWriter)
	jobs := make(chan job)
	var idle atomic.Int32
	workers := 0
	var wg sync.WaitGroup
	defer func() {
		ss.flush()
		close(jobs)
		wg.Wait() // DISC, errors and shutdown all let in-flight requests finish
	}()
	var hdr [RequestLen]byte
	for {
		// Requests already read are answered; their replies leave now,
		// before a read that may wait for the client.
		if ss.r.Buffered() < RequestLen {
			ss.flush()
		}
		if _, err := io.ReadFull(ss.r, hdr[:]); err != nil {
			return ss.readErr(ctx, "transmission", err)
		}
		req, err := ParseRequest(hdr[:])
		if err != nil {
			return violation("%w", err)
		}
		if req.Type == CmdDisc {
			return nil
		}
		ss.ops.Add(1)
		if req.Type == CmdWrite && req.Length > ss.maxBlock {
			return violation("WRITE of %d bytes exceeds the maximum block size %d", req.Length, ss.maxBlock)
		}
		weight := int64(minWeight)
		if (req.Type == CmdRead || req.Type == CmdWrite) && req.Length <= ss.maxBlock { // an oversized READ gets EINVAL, no buffer
			weight = max(weight, int64(req.Length))
		}
		if !ss.budget.TryAcquire(weight) {
			ss.flush() // the budget comes back as replies leave
			// The context is not the shutdown context: in-flight work
			// always completes.
			ss.budget.Acquire(context.Background(), weight)
		}
		if req.Type == CmdWrite && ss.writeBuffered(req, weight) {
			continue
		}
		var payload []byte
		if req.Type == CmdWrite {
			if ss.r.Buffered() < int(req.Length) {
				ss.flush()
			}
			payload = getBuf(int(req.Length))
			if _, err := io.ReadFull(ss.r, payload); err != nil {
				putBuf(payload)
				ss.budget.Release(weight)
				return ss.readErr(ctx, "WRITE payload", err)
			}
			ss.bytesWritten.Add(int64(req.Length))
		}
		if e, msg := ss.check(req); e != 0 {
			putBuf(payload)
			ss.replyError(req, e, msg, weight)
			continue
		}
		load := false
		if req.Type == CmdRead {
			var done bool
			if done, load = ss.readNow(req, weight); done {
				continue
			}
		}
		if req.Type == CmdWrite && ss.writeCached(req, payload, weight) {
			putBuf(payload)
			continue
		}
		if idle.Load() == 0 && workers < ss.srv.cfg.MaxInFlight {
			workers++
			wg.Add(1)
			go ss.work(jobs, &idle, &wg)
		}
		j := job{req: req, payload: payload, weight: weight, load: load}
		select {
		case jobs <- j:
		default:
			ss.flush()
			jobs <- j
		}
		// The hand-off took a worker that had said it was idle. Only
		// this loop takes the count down: a worker doing it after its
		// receive left a window where the next request saw it still
		// idle, started no worker, and waited for it, stuck in a reply
		// the client was not reading yet.
		idle.Add(-1)
	}
}

// readNow answers a READ on the request loop when that needs no wait for
// storage: from its mapped bytes (MappedSpanner), from the export's file
// with sendfile (FileSpanner), or from memory (CachedReader). A small
// reply is held back to go out with the others of the batch. A large one
// is sent at once, while a buffer's bytes are still in the CPU cache: held
// back behind the others, megabytes of buffers had to come back from
// memory for the send, and ten clients reading a cached image got 0.9 of
// nbdkit's speed (pread then send, per thread); sent at once, they got
// the same.
//
// When a worker must answer, load says it can take the data from the
// export's mapping (LoadingSpanner) once storage has brought it in.
func (ss *session) readNow(req Request, weight int64) (done, load bool) {
	n := int(req.Length)
	if n == 0 {
		return false, false
	}
	large := n >= minSendfile
	if large {
		if r, ok := ss.spanReply(req, weight); ok {
			ss.sendRead(r, n, true)
			return true, false
		}
		if ss.loader != nil && ss.loader.Loadable(int64(req.Offset), int64(n)) {
			return false, true // a worker waits for it, then it is copied once, from the mapping
		}
	}
	if ss.cached == nil {
		return false, false
	}
	buf := getBuf(n)
	if !ss.cached.ReadCached(buf, int64(req.Offset)) {
		putBuf(buf)
		return false, false
	}
	r := ss.dataReply(req, n, weight)
	r.body, r.pooled = buf, true
	ss.sendRead(r, n, large)
	return true, false
}

// sendRead queues the reply r to a READ of n bytes answered on the request
// loop, holding it back for the batch unless now.
func (ss *session) sendRead(r reply, n int, now bool) {
	ss.hold()
	ss.bytesRead.Add(int64(n))
	ss.send(r)
	if now {
		ss.flush()
	}
}

// writeCached is readNow for a WRITE the export can take into memory
// at once. FUA needs a Flush, which waits, so it goes to a worker. It
// does not keep payload.
func (ss *session) writeCached(req Request, payload []byte, weight int64) bool {
	if ss.cachedW == nil || len(payload) == 0 || req.Flags&CmdFlagFUA != 0 || !ss.cachedW.WriteCached(payload, int64(req.Offset)) {
		return false
	}
	ss.hold()
	ss.replyOK(req, weight)
	return true
}

// writeBuffered is writeCached straight from the read buffer, when the
// whole payload is in it: no copy into a payload buffer. On false nothing
// was consumed and the request takes the usual path (which also answers
// an invalid one).
func (ss *session) writeBuffered(req Request, weight int64) bool {
	n := int(req.Length)
	if ss.cachedW == nil || ss.r.Buffered() < n {
		return false
	}
	if e, _ := ss.check(req); e != 0 {
		return false
	}
	p, err := ss.r.Peek(n)
	if err != nil || !ss.writeCached(req, p, weight) {
		return false
	}
	ss.r.Discard(n)
	ss.bytesWritten.Add(int64(n))
	return true
}

// minSendfile is the smallest READ sent with sendfile. Below it, a pread
// into a buffer costs less than the extra system call: buffered replies
// of one batch leave in one sendmsg, while each file span needs its own
// sendfile.
const minSendfile = 64 << 10

// minWeight is the budget share of a request without a data buffer: it
// bounds the replies a client can leave unread.
const minWeight = 4096

// job is one valid request for a worker.
type job struct {
	req     Request
	payload []byte
	weight  int64
	load    bool // a READ for LoadSpan
}

func (ss *session) work(jobs <-chan job, idle *atomic.Int32, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		idle.Add(1) // the request loop takes it back when it hands over a job
		j, ok := <-jobs
		if !ok {
			return
		}
		ss.handle(j)
		putBuf(j.payload)
	}
}

// check validates a request against the negotiated flags and the export,
// returning the errno for the reply and a message for humans.
func (ss *session) check(req Request) (Errno, string) {
	var allowed CmdFlags
	writes := false
	switch req.Type {
	case CmdRead:
		// FUA on a read is legal and meaningless (proto.md: existing clients
		// set it on every command).
		allowed = CmdFlagFUA
		if ss.flags&FlagSendDF != 0 {
			allowed |= CmdFlagDF
		}
	case CmdWrite, CmdTrim:
		allowed, writes = CmdFlagFUA, true
	case CmdFlush:
		allowed = CmdFlagFUA
	case CmdWriteZeroes:
		allowed, writes = CmdFlagFUA|CmdFlagNoHole, true
	default:
		return EINVAL, fmt.Sprintf("command %v is not supported", req.Type)
	}
	if bad := req.Flags &^ allowed; bad != 0 {
		return EINVAL, fmt.Sprintf("flags %#x are not valid for %v", uint16(bad), req.Type)
	}
	if writes && ss.export.ReadOnly() {
		return EPERM, fmt.Sprintf("export %q is read-only", ss.exportName)
	}
	if req.Type == CmdFlush {
		return 0, ""
	}
	end := req.Offset + uint64(req.Length)
	if end < req.Offset || end > ss.size {
		// proto.md: writes past the end SHOULD get ENOSPC; everything
		// else gets EINVAL.
		e := EINVAL
		if req.Type == CmdWrite || req.Type == CmdWriteZeroes {
			e = ENOSPC
		}
		return e, fmt.Sprintf("%v of %d bytes at offset %d is beyond the export size %d", req.Type, req.Length, req.Offset, ss.size)
	}
	if m := uint64(ss.minBlock); req.Offset%m != 0 || uint64(req.Length)%m != 0 {
		return EINVAL, fmt.Sprintf("%v at offset %d length %d is not aligned to the minimum block size %d", req.Type, req.Offset, req.Length, m)
	}
	if (req.Type == CmdRead || req.Type == CmdWrite) && req.Length > ss.maxBlock {
		return EINVAL, fmt.Sprintf("%v of %d bytes exceeds the maximum block size %d", req.Type, req.Length, ss.maxBlock)
	}
	return 0, ""
}

// handle runs one valid request against the export and sends its reply,
// which carries the request's budget weight.
func (ss *session) handle(j job) {
	req, payload, weight := j.req, j.payload, j.weight
	e := ss.export
	off, n := int64(req.Offset), int64(req.Length)
	var err error
	switch req.Type {
	case CmdRead:
		if j.load {
			if b, ok := ss.loader.LoadSpan(off, n); ok {
				ss.bytesRead.Add(n)
				r := ss.dataReply(req, int(n), weight)
				r.body = b
				ss.send(r)
				return
			}
		}
		buf := getBuf(int(n))
		var got int
		got, err = e.ReadAt(buf, off)
		if got == len(buf) {
			err = nil // io.ReaderAt may return io.EOF with a full read at the end
		} else if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			ss.bytesRead.Add(n)
			ss.replyData(req, buf, weight)
			return
		}
		putBuf(buf)
	case CmdWrite:
		_, err = e.WriteAt(payload, off)
	case CmdFlush:
		err = e.Flush()
	case CmdTrim:
		err = e.Trim(off, n)
	case CmdWriteZeroes:
		err = writeZeroes(e, off, n, req.Flags&CmdFlagNoHole != 0)
	}
	if err == nil && req.Flags&CmdFlagFUA != 0 && req.Type != CmdRead && req.Type != CmdFlush {
		err = e.Flush()
	}
	if err != nil {
		errno := errnoOf(err)
		ss.log.Warn("nbd request failed", "cmd", req.Type.String(), "offset", off, "length", n, "errno", errno.String(), "err", err)
		ss.replyError(req, errno, fmt.Sprintf("%v failed: %s", req.Type, errno), weight)
		return
	}
	ss.replyOK(req, weight)
}

// zeroBuf is shared read-only by every writeZeroes fallback.
var zeroBuf = make([]byte, 256<<10)

func writeZeroes(e Export, off, n int64, noHole bool) error {
	if z, ok := e.(Zeroer); ok {
		return z.WriteZeroes(off, n, noHole)
	}
	for n > 0 {
		c := min(n, int64(len(zeroBuf)))
		if _, err := e.WriteAt(zeroBuf[:c], off); err != nil {
			return err
		}
		off, n = off+c, n-c
	}
	return nil
}
