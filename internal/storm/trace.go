package storm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Trace is the NBD reads of one recorded boot, in the order the client
// sent them.
//
// The text form (one line each, '#' starts a comment line):
//
//	bootfleet-trace 1
//	size 2147483648          # the export's size when recorded (optional)
//	0 4096                   # OFFSET LENGTH of one NBD_CMD_READ, decimal
//	1048576 131072
//
// Decimal keeps a diff of two traces readable; a Debian boot is some
// thousands of lines.
type Trace struct {
	Size  uint64 // export size when recorded; 0 if unknown
	Reads []Read
}

// Read is one NBD_CMD_READ.
type Read struct {
	Offset uint64
	Length uint32
}

// Bytes is the sum of the reads' lengths.
func (t *Trace) Bytes() int64 {
	var n int64
	for _, r := range t.Reads {
		n += int64(r.Length)
	}
	return n
}

// traceMagic is the first line of every trace file.
const traceMagic = "bootfleet-trace 1"

// Trace limits: a read the kernel never sends, and a file no boot makes.
const (
	maxTraceRead  = 32 << 20 // nbd.MaxPayload
	maxTraceReads = 1 << 22
)

// ErrTrace is wrapped by every trace parse error.
var ErrTrace = errors.New("nbd trace")

// ParseTrace reads the text form written by WriteTrace.
func ParseTrace(r io.Reader) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 4096)
	t := &Trace{}
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if line == 1 {
			if s != traceMagic {
				return nil, fmt.Errorf("%w: line 1: got %q, want %q", ErrTrace, truncateText(s), traceMagic)
			}
			continue
		}
		if s == "" {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: line %d: got %q, want OFFSET LENGTH or size BYTES", ErrTrace, line, truncateText(s))
		}
		if f[0] == "size" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: size %q: want a decimal byte count", ErrTrace, line, f[1])
			}
			t.Size = n
			continue
		}
		off, err1 := strconv.ParseUint(f[0], 10, 63)
		n, err2 := strconv.ParseUint(f[1], 10, 32)
		if err1 != nil || err2 != nil || n == 0 || n > maxTraceRead {
			return nil, fmt.Errorf("%w: line %d: got %q, want a decimal offset and a length of 1..%d", ErrTrace, line, truncateText(s), maxTraceRead)
		}
		if len(t.Reads) >= maxTraceReads {
			return nil, fmt.Errorf("%w: more than %d reads", ErrTrace, maxTraceReads)
		}
		t.Reads = append(t.Reads, Read{Offset: off, Length: uint32(n)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: empty file, want %q on line 1", ErrTrace, traceMagic)
	}
	return t, nil
}

// WriteTrace writes t in the form ParseTrace reads, with comment lines first.
func WriteTrace(w io.Writer, t *Trace, comments ...string) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, traceMagic)
	for _, c := range comments {
		fmt.Fprintf(bw, "# %s\n", strings.ReplaceAll(c, "\n", " "))
	}
	if t.Size > 0 {
		fmt.Fprintf(bw, "size %d\n", t.Size)
	}
	for _, r := range t.Reads {
		fmt.Fprintf(bw, "%d %d\n", r.Offset, r.Length)
	}
	return bw.Flush()
}

// Fit moves a read that would pass the end of an export of size bytes back
// inside it, 4 KiB aligned, so a trace recorded on a larger image still
// moves the same bytes. ok is false when the read cannot fit at all.
func (r Read) Fit(size uint64) (Read, bool) {
	if uint64(r.Length) > size {
		return r, false
	}
	if r.Offset+uint64(r.Length) <= size {
		return r, true
	}
	room := size - uint64(r.Length)
	r.Offset = (r.Offset % (room + 1)) &^ 4095
	return r, true
}
