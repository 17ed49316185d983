//go:build !linux

package blockstore

import (
	"os"
	"sync/atomic"
)

func probeResidency(*os.File) residency { return mayWait }

func adviseRandom(*os.File) {}

func readFileCached(*os.File, residency, []byte, int64) bool { return false }

func writeFileCached(*os.File, residency, *atomic.Bool, []byte, int64) bool { return false }

func mapImage(*os.File, int64) []byte { return nil }

// loadSpan needs a mapping, which only Linux builds make.
func (b *Image) loadSpan(off, n int64) ([]byte, bool) { return nil, false }

func unmap([]byte) error { return nil }

// mappedSpan is never ok here: images are not mapped.
func (b *Image) mappedSpan(off, n int64) ([]byte, bool) { return nil, false }

// streams order loadSpan's loads, which only Linux builds make.
type streams struct{}

func newStreams(*os.File, int64) *streams { return nil }

func (*streams) close() {}
