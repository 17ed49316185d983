package imagestore

import (
	"errors"
	"os"
	"syscall"
)

// Whence values of lseek(2) that package io does not name.
const (
	seekData = 3 // SEEK_DATA
	seekHole = 4 // SEEK_HOLE
)

// nextData returns the next range [data, hole) of f at or after off that
// may hold data; the bytes between off and data read as zeros. A file
// system that cannot tell holes reports all of f as data.
func nextData(f *os.File, off, size int64) (data, hole int64) {
	data, err := f.Seek(off, seekData)
	if err != nil { // ENXIO: only a hole is left; anything else: read it all
		if errors.Is(err, syscall.ENXIO) {
			return size, size
		}
		return off, size
	}
	if data >= size {
		return size, size
	}
	hole, err = f.Seek(data, seekHole)
	if err != nil || hole <= data || hole > size {
		return data, size
	}
	return data, hole
}

// allocated is how many bytes of the file system st's file takes.
func allocated(st os.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Blocks * 512
	}
	return st.Size()
}
