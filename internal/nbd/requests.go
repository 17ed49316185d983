package nbd

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/semaphore"
)

// transmit is the request loop. One goroutine reads requests in order (a
// WRITE's payload must be consumed before the next header), answers on
// the spot those the Store can answer without waiting, and hands the rest
// to up to MaxInFlight workers. Replies go out in completion order, which
// proto.md allows. Every request holds a share of MaxBufferBytes from
// before its payload is read until its reply has been written, so a client
// that sends without reading replies stalls instead of making the server
// buffer without bound.
func (ss *session) transmit(ctx context.Context) error {
	client, done := ss.srv.budgets.take(ss.host)
	defer done()
	ss.budget = budget{session: semaphore.NewWeighted(ss.srv.cfg.MaxBufferBytes), client: client}
	ss.out = newWire(ss.conn)
	ss.files = ss.out.sendsFiles()
	w := ss.startWorkers()
	defer w.stop()
	for {
		j, end, err := ss.receive(ctx)
		if end {
			return err
		}
		if !ss.answerNow(&j) {
			w.run(j)
		}
	}
}

// receive reads the next request and its payload, holding its budget
// share; end says the session ends instead (DISC, or err, which is nil
// for a shutdown or a clean close). A payload the read buffer holds whole
// is only peeked at (borrowed), so a WRITE answered at once is never
// copied.
func (ss *session) receive(ctx context.Context) (j job, end bool, err error) {
	// Requests already read are answered; their replies leave now, before
	// a read that may wait for the client.
	if ss.r.Buffered() < RequestLen {
		ss.flush()
	}
	var hdr [RequestLen]byte
	if _, err := io.ReadFull(ss.r, hdr[:]); err != nil {
		return job{}, true, ss.readErr(ctx, "transmission", err)
	}
	req, err := ParseRequest(hdr[:])
	if err != nil {
		return job{}, true, violation("%w", err)
	}
	if req.Type == CmdDisc {
		return job{}, true, nil
	}
	ss.ops.Add(1)
	if req.Type == CmdWrite && req.Length > ss.maxBlock {
		return job{}, true, violation("WRITE of %d bytes exceeds the maximum block size %d", req.Length, ss.maxBlock)
	}
	j = job{req: req, weight: minWeight}
	if (req.Type == CmdRead || req.Type == CmdWrite) && req.Length <= ss.maxBlock { // an oversized READ gets EINVAL, no buffer
		j.weight = max(j.weight, int64(req.Length))
	}
	if !ss.budget.tryAcquire(j.weight) {
		ss.flush() // the budget comes back as replies leave
		if !ss.stalled {
			ss.stalled = true
			ss.log.Info("nbd requests held back: replies unread, buffers at their bound",
				"session_bytes", ss.srv.cfg.MaxBufferBytes, "client_bytes", ss.srv.cfg.MaxClientBufferBytes)
		}
		ss.budget.acquire(j.weight)
	}
	if req.Type != CmdWrite {
		return j, false, nil
	}
	n := int(req.Length)
	if ss.r.Buffered() >= n {
		j.payload, _ = ss.r.Peek(n)
		j.borrowed = true
	} else {
		ss.flush()
		j.payload = getBuf(n)
		if _, err := io.ReadFull(ss.r, j.payload); err != nil {
			putBuf(j.payload)
			ss.budget.release(j.weight)
			return job{}, true, ss.readErr(ctx, "WRITE payload", err)
		}
	}
	ss.bytesWritten.Add(int64(n))
	return j, false, nil
}

// answerNow answers j on the request loop if that needs no wait for
// storage: an invalid request, a READ the Store answers with ReadNow, a
// WRITE without FUA it takes with WriteNow. Replies answered so are held
// back to leave together, except a large READ's, which leaves at once
// while its bytes are still in the CPU cache. False means a worker must
// answer j, which then owns its payload.
func (ss *session) answerNow(j *job) (answered bool) {
	req, n := j.req, int(j.req.Length)
	defer func() { ss.settle(j, answered) }()
	if e, msg := ss.check(req); e != 0 {
		ss.replyError(req, e, msg, j.weight)
		return true
	}
	switch {
	case req.Type == CmdRead && n == 0:
		ss.hold()
		ss.replyData(req, nil, j.weight)
		return true
	case req.Type == CmdRead:
		buf := getBuf(n)
		s, ok := ss.export.ReadNow(buf, int64(req.Offset), ss.files)
		if !ok {
			putBuf(buf)
			return false
		}
		ss.hold()
		ss.replySpan(req, buf, s, j.weight)
		if n >= sendAlone {
			ss.flush()
		}
		return true
	case req.Type == CmdWrite && n > 0 && req.Flags&CmdFlagFUA == 0:
		if !ss.export.WriteNow(j.payload, int64(req.Offset)) {
			return false
		}
		ss.hold()
		ss.replyOK(req, j.weight)
		return true
	}
	return false
}

// settle gives back the payload of a request answered at once, and gives
// a worker its own copy of one borrowed from the read buffer.
func (ss *session) settle(j *job, answered bool) {
	n := len(j.payload)
	switch {
	case answered && j.borrowed:
		ss.r.Discard(n)
	case answered:
		putBuf(j.payload)
	case j.borrowed:
		p := getBuf(n)
		copy(p, j.payload)
		ss.r.Discard(n)
		j.payload = p
	}
	if answered {
		j.payload = nil
	}
	j.borrowed = false
}

// sendAlone is the size from which a READ answered on the request loop is
// sent at once instead of with the batch: held back behind the others,
// megabytes of buffers had to come back from memory for the send.
const sendAlone = 64 << 10

// minWeight is the budget share of a request without a data buffer: it
// bounds the replies a client can leave unread.
const minWeight = 4096

// job is one request for a worker.
type job struct {
	req      Request
	payload  []byte
	borrowed bool // payload is the read buffer's, valid until the next read
	weight   int64
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
	if writes && ss.info.ReadOnly {
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

// handle runs one valid request on a worker and sends its reply, which
// carries the request's budget weight.
func (ss *session) handle(j job) {
	req, payload, weight := j.req, j.payload, j.weight
	e := ss.export
	off, n := int64(req.Offset), int64(req.Length)
	var err error
	switch req.Type {
	case CmdRead:
		buf := getBuf(int(n))
		var sp Span
		if sp, err = ss.export.ReadSpan(buf, off); err == nil {
			ss.replySpan(req, buf, sp, weight)
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
		err = e.WriteZeroes(off, n, req.Flags&CmdFlagNoHole != 0)
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
