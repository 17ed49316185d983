package storm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

// requestScanner reads what an NBD client sends to its server, fed in
// pieces as they were captured, and reports each NBD_CMD_READ. It needs
// no server side: after the 4 bytes of client flags come option requests
// (each starts with IHAVEOPT) until the first transmission request (its
// own magic), whether the client chose its export with NBD_OPT_GO or
// NBD_OPT_EXPORT_NAME.
type requestScanner struct {
	onRead func(Read)
	buf    []byte
	state  int   // scanFlags, scanOptions, scanRequests
	skip   int64 // WRITE payload bytes still to pass over
	err    error
	writes int64 // NBD_CMD_WRITEs seen
}

const (
	scanFlags = iota
	scanOptions
	scanRequests
)

// Scanner limits: an option's data is an export name and a few info
// requests, never more than NBD's 4 KiB string limit and change.
const maxOptionData = 64 << 10

var (
	ihaveopt = binary.BigEndian.AppendUint64(nil, 0x49484156454F5054)
	reqMagic = binary.BigEndian.AppendUint32(nil, 0x25609513)
)

// ErrNBDStream is wrapped by every error of the request scanner.
var ErrNBDStream = errors.New("nbd client stream")

// Write feeds the next bytes of the client's stream. After an error every
// later Write returns it: the stream cannot be followed any more.
func (s *requestScanner) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(p)
	if s.skip > 0 {
		k := min(int64(len(p)), s.skip)
		s.skip -= k
		p = p[k:]
	}
	s.buf = append(s.buf, p...)
	s.err = s.scan()
	return n, s.err
}

// scan consumes every complete message in buf.
func (s *requestScanner) scan() error {
	for {
		switch s.state {
		case scanFlags:
			if len(s.buf) < nbd.ClientFlagsLen {
				return nil
			}
			s.consume(nbd.ClientFlagsLen)
			s.state = scanOptions
		case scanOptions:
			if len(s.buf) < 4 {
				return nil
			}
			if string(s.buf[:4]) == string(reqMagic) {
				s.state = scanRequests
				continue
			}
			if len(s.buf) < nbd.OptionHeaderLen {
				return nil
			}
			h, err := nbd.ParseOptionHeader(s.buf)
			if err != nil {
				return fmt.Errorf("%w: option phase: %w", ErrNBDStream, err)
			}
			if h.Length > maxOptionData {
				return fmt.Errorf("%w: option %v with %d bytes of data, want at most %d", ErrNBDStream, h.Option, h.Length, maxOptionData)
			}
			if len(s.buf) < nbd.OptionHeaderLen+int(h.Length) {
				return nil
			}
			s.consume(nbd.OptionHeaderLen + int(h.Length))
		case scanRequests:
			if len(s.buf) < nbd.RequestLen {
				return nil
			}
			r, err := nbd.ParseRequest(s.buf)
			if err != nil {
				return fmt.Errorf("%w: transmission phase: %w (extended headers are not supported)", ErrNBDStream, err)
			}
			s.consume(nbd.RequestLen)
			switch r.Type {
			case nbd.CmdRead:
				if r.Length > 0 {
					s.onRead(Read{Offset: r.Offset, Length: r.Length})
				}
			case nbd.CmdWrite:
				s.writes++
				k := min(int64(len(s.buf)), int64(r.Length))
				s.consume(int(k))
				s.skip = int64(r.Length) - k
			}
		}
	}
}

// consume drops n bytes from the front of buf, keeping its capacity.
func (s *requestScanner) consume(n int) {
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
}
