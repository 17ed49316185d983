package nbd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/sync/semaphore"
)

// transmit is the request loop. One goroutine reads requests in order (a
// WRITE's payload must be consumed before the next header); each request
// then runs on its own goroutine, bounded by MaxInFlight and
// MaxBufferBytes, and replies go out under wmu in completion order, which
// proto.md allows.
func (ss *session) transmit(ctx context.Context) error {
	slots := make(chan struct{}, ss.srv.cfg.MaxInFlight)
	budget := semaphore.NewWeighted(ss.srv.cfg.MaxBufferBytes)
	var wg sync.WaitGroup
	defer wg.Wait() // DISC, errors and shutdown all let in-flight requests finish
	var hdr [RequestLen]byte
	for {
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
		weight := int64(0)
		if req.Type == CmdRead || req.Type == CmdWrite {
			weight = int64(req.Length)
		}
		if req.Type == CmdWrite && req.Length > ss.maxBlock {
			return violation("WRITE of %d bytes exceeds the maximum block size %d", req.Length, ss.maxBlock)
		}
		if weight > int64(ss.maxBlock) { // an oversized READ gets EINVAL below, no buffer
			weight = 0
		}
		// Acquire before reading the payload so a client cannot make the
		// server buffer more than the budget. The context is not the
		// shutdown context: in-flight work always completes.
		budget.Acquire(context.Background(), weight)
		var payload []byte
		if req.Type == CmdWrite {
			payload = getBuf(int(req.Length))
			if _, err := io.ReadFull(ss.r, payload); err != nil {
				putBuf(payload)
				budget.Release(weight)
				return ss.readErr(ctx, "WRITE payload", err)
			}
			ss.bytesWritten.Add(int64(req.Length))
		}
		if e, msg := ss.check(req); e != 0 {
			putBuf(payload)
			budget.Release(weight)
			ss.replyError(req, e, msg)
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss.handle(req, payload)
			putBuf(payload)
			budget.Release(weight)
			<-slots
		}()
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

// handle runs one valid request against the export and replies.
func (ss *session) handle(req Request, payload []byte) {
	e := ss.export
	off, n := int64(req.Offset), int64(req.Length)
	var err error
	switch req.Type {
	case CmdRead:
		buf := getBuf(int(n))
		defer putBuf(buf)
		var got int
		got, err = e.ReadAt(buf, off)
		if got == len(buf) {
			err = nil // io.ReaderAt may return io.EOF with a full read at the end
		} else if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			ss.replyData(req, buf)
			ss.bytesRead.Add(n)
			return
		}
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
		ss.replyError(req, errno, fmt.Sprintf("%v failed: %s", req.Type, errno))
		return
	}
	ss.replyOK(req)
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

func (ss *session) send(bufs ...[]byte) {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	if ss.werr != nil {
		return
	}
	nb := net.Buffers(bufs)
	if _, err := nb.WriteTo(ss.conn); err != nil {
		ss.werr = err
		// Wake the reader so the session ends instead of reading requests
		// it can no longer answer.
		ss.conn.Close()
		if !errors.Is(err, net.ErrClosed) {
			ss.log.Info("nbd reply failed; closing", "err", err)
		}
	}
}

func (ss *session) replyOK(req Request) {
	ss.send(AppendSimpleReply(make([]byte, 0, SimpleReplyLen), req.Handle, 0))
}

func (ss *session) replyData(req Request, data []byte) {
	var hdr []byte
	if ss.structured {
		if len(data) == 0 { // OFFSET_DATA must carry at least one byte
			ss.send(AppendNoneChunk(nil, req.Handle))
			return
		}
		hdr = AppendOffsetDataHeader(make([]byte, 0, ChunkHeaderLen+offsetDataExtra), req.Handle, req.Offset, uint32(len(data)), true)
	} else {
		hdr = AppendSimpleReply(make([]byte, 0, SimpleReplyLen), req.Handle, 0)
	}
	ss.send(hdr, data)
}

// replyError sends an error. With structured replies it carries msg for the
// client's user; a simple READ error reply carries no data, as proto.md
// requires when the server keeps the connection.
func (ss *session) replyError(req Request, e Errno, msg string) {
	if ss.structured {
		ss.send(AppendErrorChunk(nil, req.Handle, e, msg))
		return
	}
	ss.send(AppendSimpleReply(nil, req.Handle, e))
}

// Buffers up to poolBufLen are recycled; reads and writes from the kernel
// client are at most 128 KiB by default.
const poolBufLen = 128 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, poolBufLen); return &b }}

func getBuf(n int) []byte {
	if n > poolBufLen {
		return make([]byte, n)
	}
	return (*bufPool.Get().(*[]byte))[:n]
}

func putBuf(b []byte) {
	if cap(b) != poolBufLen {
		return
	}
	b = b[:poolBufLen]
	bufPool.Put(&b)
}
