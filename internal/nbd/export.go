package nbd

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Export is one block device the server serves: its Store answers READs
// and in-memory WRITEs, the rest of the methods the commands that change
// or sync it. The server calls them from several goroutines at once (one
// connection runs up to Config.MaxInFlight requests concurrently), so
// implementations must be safe for concurrent use. Offsets and lengths
// are checked against Info's size and block sizes before any call, and
// the write methods are never called on a read-only export.
//
// Errors reach the client as NBD errno values: an error that wraps
// syscall.ENOSPC (or EDQUOT, EFBIG) becomes ENOSPC, one that wraps
// syscall.EPERM or EROFS becomes EPERM, anything else EIO.
type Export interface {
	Store
	// Info says what the export is and can do. The server reads it once,
	// when a client picks the export, and keeps it for the session.
	Info() ExportInfo
	// WriteAt takes a WRITE that WriteNow did not, on a worker.
	io.WriterAt
	// Flush makes every write that has returned durable (fsync). The server
	// calls it for NBD_CMD_FLUSH and after writes flagged FUA.
	Flush() error
	// Trim tells the export that the range is no longer needed; what it
	// reads afterwards is unspecified until written again.
	Trim(off, n int64) error
	// WriteZeroes writes zeroes over the range. noHole is
	// NBD_CMD_FLAG_NO_HOLE: the client wants the range allocated, not
	// punched.
	WriteZeroes(off, n int64, noHole bool) error
	// Close is called once, when the client's session ends (after
	// NBD_OPT_INFO, or at disconnect after NBD_OPT_GO). An export shared
	// between clients must count its sessions or do nothing here.
	Close() error
}

// ExportInfo is everything the server offers a client about an export,
// in one value, as nbdkit's get_size and can_* callbacks are asked once
// per connection. The zero value of every field but Size is a valid
// default.
type ExportInfo struct {
	// Size is the export size in bytes. It must not change while a client
	// is connected: clients learn it once, during the handshake.
	Size int64
	// ReadOnly exports refuse WRITE, TRIM and WRITE_ZEROES with EPERM and
	// are advertised with NBD_FLAG_CAN_MULTI_CONN.
	ReadOnly bool
	// MultiConn advertises a writable export with NBD_FLAG_CAN_MULTI_CONN,
	// so clients may spread I/O over several connections. Set it only if
	// every connection to the export name reaches one storage object: a
	// write that completed on one connection is seen by reads on all, and
	// a Flush on any makes every completed write durable (proto.md).
	MultiConn bool
	// Description is sent as NBD_INFO_DESCRIPTION to a client that asks;
	// empty sends none.
	Description string
	// MinBlock, PreferredBlock and MaxBlock are NBD_INFO_BLOCK_SIZE. min
	// must be a power of two from 1 to 64 KiB, preferred a power of two
	// >= max(min, 512), max a multiple of min; a value that breaks its
	// rule (or 0) gets the default: 1, 4096 and 32 MiB. Requests not
	// aligned to min, or longer than max, get EINVAL.
	MinBlock, PreferredBlock, MaxBlock uint32
	// Revoked, if not nil, lets the policy take the export away from
	// connected clients: once it is closed, the server stops reading
	// requests on the export's sessions, finishes the ones in flight and
	// closes the connections (bootfleet's forced machine reset, which must
	// not leave a running machine writing into a discarded disk).
	Revoked <-chan struct{}
}

// Exports is the policy that maps a client's requested export name to an
// Export. remote is the client's address, so an implementation can check
// that the name's per-boot secret belongs to the machine at that address.
// Return an error wrapping ErrUnknownExport or ErrRefused to choose the
// client's reply (NBD_REP_ERR_UNKNOWN or NBD_REP_ERR_POLICY); any other
// error is logged and the client gets NBD_REP_ERR_UNKNOWN. NBD_OPT_LIST
// always gets NBD_REP_ERR_POLICY: bootfleet's export names are secrets.
type Exports interface {
	Lookup(name string, remote net.Addr) (Export, error)
}

// SessionStats describes one finished client connection.
type SessionStats struct {
	Remote       net.Addr
	Export       string // empty if the client never chose one
	BytesRead    int64  // payload bytes sent to the client
	BytesWritten int64  // payload bytes received from the client
	Ops          int64  // transmission requests handled
	Duration     time.Duration
	Err          error // why the session ended abnormally; nil on a clean disconnect
}

// Hook receives telemetry. Calls come from connection goroutines and must
// not block for long.
type Hook interface {
	OnSession(SessionStats)
}

// errnoOf maps an Export error to the reply's errno (proto.md, "Error
// values": EDQUOT and EFBIG are reported as ENOSPC).
func errnoOf(err error) Errno {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return ENOSPC
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return EPERM
	case errors.Is(err, syscall.EINVAL):
		return EINVAL
	}
	return EIO
}
