package nbd

import (
	"io"
	"os"
)

// Store is how an Export answers READs with data the server can send as
// it is, and takes WRITEs without a worker. It is the whole contract
// between the transport and storage on the data path: the server asks,
// sends the Span it gets, and leaves every choice of where bytes come
// from to the Store.
type Store interface {
	// ReadNow answers a READ of len(p) bytes at off on the request loop,
	// only if it can without waiting for storage; false hands the READ to
	// a worker's ReadSpan. files says the connection can send a file span
	// (sendfile); without it the Span must be bytes.
	ReadNow(p []byte, off int64, files bool) (Span, bool)
	// ReadSpan answers a READ of len(p) bytes at off from a worker,
	// waiting for storage if it must. It returns bytes, never a file span.
	ReadSpan(p []byte, off int64) (Span, error)
	// WriteNow writes p at off on the request loop, only if it can without
	// waiting for storage (the page cache may still throttle a writer that
	// outruns the disk). False hands the WRITE to a worker's WriteAt with
	// the same bytes, which also completes a write WriteNow left half done.
	// The server never calls it for FUA writes.
	WriteNow(p []byte, off int64) bool
}

// Span is the data of one READ, all len(p) bytes of it: Bytes, or else
// the same number of bytes of File from FileOff. Bytes may be the p the
// server passed in, which it owns again once the reply has left, or bytes
// of the store's own that must stay valid and unchanged until the session
// ends (an image's mapping). A file span must hold immutable data (a base
// image) that sendfile can send without waiting for storage, since
// replies leave one after another, and the file must stay open until the
// session ends.
type Span struct {
	Bytes   []byte
	File    *os.File
	FileOff int64
}

// ReadFull fills p from r at off. An io.ReaderAt may return io.EOF with a
// full read at the end, which counts as success; a short read is
// io.ErrUnexpectedEOF.
func ReadFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
