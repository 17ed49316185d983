package tftp

import (
	"bytes"
	"fmt"
	"io"
)

// maxNetasciiSize bounds the files served in netascii mode. Conversion
// changes the length, so the converted file is built in memory (tsize must be
// exact and retransmissions need random access). Boot firmware always uses
// octet mode; netascii exists for people typing "get" in a tftp shell, on
// small text files.
const maxNetasciiSize = 1 << 20

// toNetascii converts f (RFC 764 via RFC 1350): LF becomes CR LF and a bare
// CR becomes CR NUL.
func toNetascii(f File) (*memFile, error) {
	if f.Size() > maxNetasciiSize {
		return nil, fmt.Errorf("netascii mode is limited to files of %d bytes, this one has %d; ask for octet (binary) mode", maxNetasciiSize, f.Size())
	}
	raw := make([]byte, f.Size())
	if n, err := f.ReadAt(raw, 0); n < len(raw) {
		return nil, fmt.Errorf("reading file for netascii conversion: %w", err)
	}
	var out bytes.Buffer
	out.Grow(len(raw) + len(raw)/16)
	for _, c := range raw {
		switch c {
		case '\n':
			out.WriteString("\r\n")
		case '\r':
			out.WriteString("\r\x00")
		default:
			out.WriteByte(c)
		}
	}
	return &memFile{data: out.Bytes()}, nil
}

// memFile is a File held in memory.
type memFile struct {
	data    []byte
	onClose func()
}

func (m *memFile) Size() int64 { return int64(len(m.data)) }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("negative offset %d", off)
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) Close() error {
	if m.onClose != nil {
		m.onClose()
		m.onClose = nil
	}
	return nil
}
