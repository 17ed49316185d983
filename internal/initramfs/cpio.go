package initramfs

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// CPIOWriter writes a "newc" (SVR4, no CRC) cpio archive, the format the
// kernel unpacks into its initial rootfs (Documentation/driver-api/early-userspace/buffer-format.rst).
//
// Each entry is a 110-byte ASCII header, the NUL-terminated name padded to
// a multiple of 4, then the data padded to a multiple of 4:
//
//	"070701" ino mode uid gid nlink mtime filesize devmajor devminor
//	         rdevmajor rdevminor namesize check     (13 fields, 8 hex digits each)
//
// Times and owners are always 0 so archives are reproducible. Names are
// stored relative ("bin/sh"), as GNU cpio does.
type CPIOWriter struct {
	w      io.Writer
	ino    uint32
	closed bool
	err    error
}

// File type bits of the mode field (from stat.h).
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
	trailerName = "TRAILER!!!"
)

// NewCPIOWriter returns a writer that appends entries to w.
func NewCPIOWriter(w io.Writer) *CPIOWriter { return &CPIOWriter{w: w} }

// Dir adds a directory.
func (c *CPIOWriter) Dir(name string, perm uint32) error {
	return c.entry(name, modeDir|perm&0o7777, 2, 0, 0, nil)
}

// File adds a regular file with data.
func (c *CPIOWriter) File(name string, perm uint32, data []byte) error {
	return c.entry(name, modeRegular|perm&0o7777, 1, 0, 0, data)
}

// Symlink adds a symbolic link name -> target.
func (c *CPIOWriter) Symlink(name, target string) error {
	return c.entry(name, modeSymlink|0o777, 1, 0, 0, []byte(target))
}

// CharDev adds a character device node; the kernel creates it even when the
// builder is not root, which is why /dev/console belongs in the archive.
func (c *CPIOWriter) CharDev(name string, perm, major, minor uint32) error {
	return c.entry(name, modeChar|perm&0o7777, 1, major, minor, nil)
}

// Close writes the trailer. It does not close the underlying writer.
func (c *CPIOWriter) Close() error {
	if c.closed {
		return c.err
	}
	c.closed = true
	c.ino = 0
	return c.write(trailerName, 0, 1, 0, 0, nil)
}

func (c *CPIOWriter) entry(name string, mode, nlink, rmaj, rmin uint32, data []byte) error {
	if c.closed {
		return errors.New("cpio: write after Close")
	}
	name = strings.TrimPrefix(name, "/")
	if name == "" || name == trailerName || strings.Contains(name, "\x00") || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") {
		return fmt.Errorf("cpio: bad entry name %q", name)
	}
	c.ino++
	return c.write(name, mode, nlink, rmaj, rmin, data)
}

var padding [4]byte

func (c *CPIOWriter) write(name string, mode, nlink, rmaj, rmin uint32, data []byte) error {
	if c.err != nil {
		return c.err
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmaj, rmin, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+4)
	buf = append(append(append(buf, hdr...), name...), 0)
	buf = append(buf, padding[:pad4(len(buf))]...)
	if _, c.err = c.w.Write(buf); c.err != nil {
		return c.err
	}
	if len(data) > 0 {
		if _, c.err = c.w.Write(data); c.err != nil {
			return c.err
		}
		_, c.err = c.w.Write(padding[:pad4(len(data))])
	}
	return c.err
}

func pad4(n int) int { return (4 - n%4) % 4 }
