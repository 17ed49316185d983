package nbd

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Export is one block device the server serves; one that also implements
// Store chooses how its READs' bytes are sent. The server calls its
// methods from several goroutines at once (one connection runs up to
// Config.MaxInFlight requests concurrently), so implementations must be safe
// for concurrent use. Offsets and lengths are checked against Size before
// any call, so an Export never sees an out-of-range request.
//
// Size must not change while a client is connected: clients learn it once,
// during the handshake.
//
// Errors reach the client as NBD errno values: an error that wraps
// syscall.ENOSPC (or EDQUOT, EFBIG) becomes ENOSPC, one that wraps
// syscall.EPERM or EROFS becomes EPERM, anything else EIO.
type Export interface {
	io.ReaderAt
	io.WriterAt
	// Size is the export size in bytes.
	Size() int64
	// Flush makes every write that has returned durable (fsync). The server
	// calls it for NBD_CMD_FLUSH and after writes flagged FUA.
	Flush() error
	// Trim tells the export that the range is no longer needed; what it
	// reads afterwards is unspecified until written again.
	Trim(off, n int64) error
	// ReadOnly exports refuse WRITE, TRIM and WRITE_ZEROES with EPERM and
	// are advertised with NBD_FLAG_CAN_MULTI_CONN.
	ReadOnly() bool
}

// Optional upgrades an Export may implement; the data path's is Store.
type (
	// Zeroer writes zeroes without the server sending a zero buffer through
	// WriteAt. noHole is NBD_CMD_FLAG_NO_HOLE: the client wants the range
	// allocated, not punched. Without Zeroer the server writes zero buffers.
	Zeroer interface {
		WriteZeroes(off, n int64, noHole bool) error
	}
	// Describer supplies NBD_INFO_DESCRIPTION, a human-readable text.
	Describer interface {
		Description() string
	}
	// MultiConner lets a writable export be advertised with
	// NBD_FLAG_CAN_MULTI_CONN, so clients may spread I/O over several
	// connections. Return true only if every connection to the export name
	// reaches one storage object: a write that completed on one connection
	// is seen by reads on all, and a Flush on any makes every completed
	// write durable (proto.md). Read-only exports get the flag anyway.
	MultiConner interface {
		MultiConn() bool
	}
	// Revoker lets the policy take an export away from connected clients:
	// once Revoked's channel is closed, the server stops reading requests
	// on the export's sessions, finishes the ones in flight and closes the
	// connections (bootfleet's forced machine reset, which must not leave
	// a running machine writing into a discarded disk).
	Revoker interface {
		Revoked() <-chan struct{}
	}
	// BlockSizer supplies NBD_INFO_BLOCK_SIZE. min must be a power of two
	// from 1 to 64 KiB, preferred a power of two >= max(min, 512), max a
	// multiple of min. Requests not aligned to min, or longer than max, get
	// EINVAL. Without BlockSizer the server uses 1, 4096 and 32 MiB.
	BlockSizer interface {
		BlockSize() (min, preferred, max uint32)
	}
)

// If an Export returned by Lookup also implements io.Closer, the server
// closes it once when the client's session ends (after NBD_OPT_INFO, or at
// disconnect after NBD_OPT_GO). Return a wrapper without Close for exports
// shared between clients.

// Exports is the policy that maps a client's requested export name to an
// Export. remote is the client's address, so an implementation can check
// that the name's per-boot secret belongs to the machine at that address.
// Return an error wrapping ErrUnknownExport or ErrRefused to choose the
// client's reply (NBD_REP_ERR_UNKNOWN or NBD_REP_ERR_POLICY); any other
// error is logged and the client gets NBD_REP_ERR_UNKNOWN.
type Exports interface {
	Lookup(name string, remote net.Addr) (Export, error)
}

// Lister is an optional upgrade of Exports that answers NBD_OPT_LIST.
// Without it, NBD_OPT_LIST gets NBD_REP_ERR_POLICY, which suits a server
// whose export names are secrets.
type Lister interface {
	List(remote net.Addr) ([]string, error)
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
