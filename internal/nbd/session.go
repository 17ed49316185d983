package nbd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// maxOptions bounds option requests per connection; a client still haggling
// after this many is treated as a denial of service (proto.md allows a hard
// disconnect then).
const maxOptions = 256

// offeredFlags are the handshake flags the server sends.
const offeredFlags = FlagFixedNewstyle | FlagNoZeroes

// session is one client connection.
type session struct {
	srv *Server
	// handshakeDone frees the connection's handshake slot (admission).
	handshakeDone func()
	host          string // the client's address, which per-client bounds count by
	conn          net.Conn
	r             *bufio.Reader
	remote        net.Addr
	log           *slog.Logger

	noZeroes   bool
	structured bool

	// Set once the client chose an export.
	exportName string
	export     Export
	info       ExportInfo // the export's, read once at attach
	size       uint64
	flags      TransmissionFlags
	minBlock   uint32
	maxBlock   uint32

	// Set when transmission starts.
	budget  budget // held by requests until their replies leave
	stalled bool   // the budget has held back a request (logged once)
	out     wire
	replies replyQueue
	files   bool // out can send file spans

	revoked                      atomic.Bool
	bytesRead, bytesWritten, ops atomic.Int64
}

var (
	// errAbort ends a session the client closed with NBD_OPT_ABORT.
	errAbort = errors.New("client sent NBD_OPT_ABORT")
	// ErrRevoked ends the sessions of an export whose Revoked channel
	// was closed.
	ErrRevoked = errors.New("the export was revoked (forced machine reset); connection closed")
)

func (ss *session) run(ctx context.Context) error {
	ss.conn.SetDeadline(time.Now().Add(ss.srv.cfg.HandshakeTimeout))
	err := ss.handshake()
	if errors.Is(err, errAbort) {
		return nil
	}
	if err != nil {
		return ss.readErr(ctx, "handshake", err)
	}
	ss.conn.SetDeadline(time.Time{})
	ss.handshakeDone()
	if ctx.Err() != nil { // shutdown raced with the end of the handshake
		return nil
	}
	ss.log.Info("nbd client attached", "size", ss.size,
		"read_only", ss.info.ReadOnly, "structured_replies", ss.structured)
	if revoked := ss.info.Revoked; revoked != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-revoked:
				// Stop reading, like shutdown: in-flight requests finish.
				ss.revoked.Store(true)
				ss.conn.SetReadDeadline(time.Now())
			case <-done:
			}
		}()
	}
	return ss.transmit(ctx)
}

// readErr classifies a read failure: shutdown and clean EOF are not errors
// the admin must act on.
func (ss *session) readErr(ctx context.Context, phase string, err error) error {
	var perr *protocolError
	switch {
	case ss.revoked.Load():
		return ErrRevoked
	case errors.As(err, &perr):
		return err
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("client closed the connection during %s without a disconnect request: %w", phase, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && phase == "handshake" {
		return violation("handshake not finished within %v", ss.srv.cfg.HandshakeTimeout)
	}
	return fmt.Errorf("%s: %w", phase, err)
}

// handshake runs the fixed newstyle negotiation until the client picks an
// export (NBD_OPT_GO or NBD_OPT_EXPORT_NAME), aborts, or violates the
// protocol.
func (ss *session) handshake() error {
	if _, err := ss.conn.Write(AppendGreeting(nil, offeredFlags)); err != nil {
		return err
	}
	var b [OptionHeaderLen]byte
	if _, err := io.ReadFull(ss.r, b[:ClientFlagsLen]); err != nil {
		return err
	}
	cf, err := ParseClientFlags(b[:ClientFlagsLen], offeredFlags)
	if err != nil {
		return violation("%w", err)
	}
	ss.noZeroes = cf&ClientNoZeroes != 0
	for range maxOptions {
		if _, err := io.ReadFull(ss.r, b[:]); err != nil {
			return err
		}
		h, err := ParseOptionHeader(b[:])
		if err != nil {
			return violation("%w", err)
		}
		if h.Length > MaxOptionLen {
			return violation("%v carries %d bytes of data, the server accepts at most %d", h.Option, h.Length, MaxOptionLen)
		}
		data := make([]byte, h.Length)
		if _, err := io.ReadFull(ss.r, data); err != nil {
			return err
		}
		done, err := ss.option(h.Option, data)
		if err != nil || done {
			return err
		}
	}
	return violation("client sent %d options without choosing an export", maxOptions)
}

// option answers one option. done means transmission begins.
func (ss *session) option(o Option, data []byte) (done bool, err error) {
	switch o {
	case OptExportName:
		return true, ss.optExportName(data)
	case OptAbort:
		// The client may already have hung up; proto.md asks both sides to
		// tolerate that, so the write error does not matter.
		ss.optReply(o, RepAck, nil)
		return false, errAbort
	case OptList:
		return false, ss.optList(data)
	case OptStructuredReply:
		if len(data) != 0 {
			return false, ss.optError(o, RepErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data, got %d bytes", len(data))
		}
		ss.structured = true
		return false, ss.optReply(o, RepAck, nil)
	case OptInfo, OptGo:
		return ss.optInfo(o, data)
	case OptStartTLS:
		return false, ss.optError(o, RepErrUnsup, "this server does not offer TLS")
	}
	return false, ss.optError(o, RepErrUnsup, "option %v is not supported", o)
}

func (ss *session) optReply(o Option, t ReplyType, data []byte) error {
	_, err := ss.conn.Write(AppendOptionReply(nil, o, t, data))
	return err
}

func (ss *session) optError(o Option, t ReplyType, format string, args ...any) error {
	return ss.optReply(o, t, fmt.Appendf(nil, format, args...))
}

func (ss *session) optList(data []byte) error {
	if len(data) != 0 {
		return ss.optError(OptList, RepErrInvalid, "NBD_OPT_LIST takes no data, got %d bytes", len(data))
	}
	return ss.optError(OptList, RepErrPolicy, "this server does not list its exports")
}

// lookup asks the policy for an export and says which error reply a
// refusal gets.
func (ss *session) lookup(name string) (Export, ReplyType, error) {
	e, err := ss.srv.exports.Lookup(name, ss.remote)
	switch {
	case err == nil && e == nil:
		return nil, RepErrUnknown, fmt.Errorf("export %q: %w", name, ErrUnknownExport)
	case err == nil:
		return e, 0, nil
	case errors.Is(err, ErrRefused):
		ss.log.Warn("nbd export refused", "export", ss.srv.label(name), "err", err)
		return nil, RepErrPolicy, err
	case errors.Is(err, ErrUnknownExport):
		ss.log.Info("nbd unknown export requested", "export", ss.srv.label(name))
		return nil, RepErrUnknown, err
	}
	ss.log.Error("nbd export lookup failed", "export", ss.srv.label(name), "err", err)
	return nil, RepErrUnknown, err
}

func (ss *session) optExportName(data []byte) error {
	name, err := ParseExportName(data)
	if err != nil {
		return violation("%w", err)
	}
	e, _, err := ss.lookup(name)
	if err != nil {
		// NBD_OPT_EXPORT_NAME has no error reply: proto.md says close.
		return violation("NBD_OPT_EXPORT_NAME %q refused: %w", name, err)
	}
	ss.attach(name, e, e.Info())
	_, err = ss.conn.Write(AppendExportNameReply(nil, ss.size, ss.flags, ss.noZeroes))
	return err
}

func (ss *session) optInfo(o Option, data []byte) (bool, error) {
	req, err := ParseInfoRequest(data)
	if err != nil {
		return false, ss.optError(o, RepErrInvalid, "%v", err)
	}
	e, rt, err := ss.lookup(req.Name)
	if err != nil {
		msg := fmt.Sprintf("export %q is not available to this client", req.Name)
		if rt == RepErrUnknown {
			msg = fmt.Sprintf("unknown export %q", req.Name)
		}
		return false, ss.optReply(o, rt, []byte(msg))
	}
	info := e.Info()
	minB, prefB, maxB := blockSizes(info)
	if o == OptGo && minB > 1 && !req.Requested(InfoBlockSize) {
		e.Close()
		return false, ss.optError(o, RepErrBlockSizeRq, "export %q needs requests aligned to %d bytes; request NBD_INFO_BLOCK_SIZE", req.Name, minB)
	}
	infos := []Info{{Type: InfoExport, Size: uint64(info.Size), Flags: ss.transmissionFlags(info)}}
	if req.Requested(InfoName) {
		infos = append(infos, Info{Type: InfoName, Text: req.Name})
	}
	if info.Description != "" && req.Requested(InfoDescription) {
		infos = append(infos, Info{Type: InfoDescription, Text: info.Description})
	}
	if req.Requested(InfoBlockSize) {
		infos = append(infos, Info{Type: InfoBlockSize, MinBlock: minB, PreferredBlock: prefB, MaxBlock: maxB})
	}
	var out []byte
	for _, in := range infos {
		out = AppendOptionReply(out, o, RepInfo, AppendInfo(nil, in))
	}
	out = AppendOptionReply(out, o, RepAck, nil)
	if _, err := ss.conn.Write(out); err != nil {
		e.Close()
		return false, err
	}
	if o == OptInfo {
		e.Close()
		return false, nil
	}
	ss.attach(req.Name, e, info)
	return true, nil
}

// attach makes e the session's export, described by info (e's Info).
func (ss *session) attach(name string, e Export, info ExportInfo) {
	ss.exportName, ss.export, ss.info = name, e, info
	ss.size = uint64(info.Size)
	ss.flags = ss.transmissionFlags(info)
	ss.minBlock, _, ss.maxBlock = blockSizes(info)
	ss.log = ss.log.With("export", ss.srv.label(name))
}

func (ss *session) transmissionFlags(info ExportInfo) TransmissionFlags {
	f := FlagHasFlags | FlagSendFlush | FlagSendFUA
	if info.ReadOnly {
		// Nothing can change a read-only export, so every connection sees
		// the same bytes: safe for clients to spread over connections.
		f |= FlagReadOnly | FlagCanMultiConn
	} else {
		f |= FlagSendTrim | FlagSendWriteZeroes
		if info.MultiConn {
			f |= FlagCanMultiConn
		}
	}
	if ss.structured {
		// Every READ is answered with one data chunk anyway.
		f |= FlagSendDF
	}
	return f
}

// blockSizes returns the export's block size constraints, with defaults for
// values that break their rules and with max capped at MaxPayload.
func blockSizes(info ExportInfo) (minB, prefB, maxB uint32) {
	minB, prefB, maxB = 1, 4096, MaxPayload
	if mi := info.MinBlock; mi >= 1 && mi <= 64<<10 && mi&(mi-1) == 0 {
		minB = mi
	}
	if pr := info.PreferredBlock; pr >= max(minB, 512) && pr&(pr-1) == 0 {
		prefB = pr
	}
	if ma := info.MaxBlock; ma >= minB && ma%minB == 0 {
		maxB = ma
	}
	prefB = max(prefB, minB)
	maxB = min(maxB, MaxPayload/minB*minB)
	return minB, prefB, maxB
}
