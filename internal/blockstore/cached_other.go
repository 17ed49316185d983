//go:build !linux

package blockstore

import (
	"os"
	"sync/atomic"
)

func probeResidency(*os.File) residency { return mayWait }

func readCached(*os.File, residency, []byte, int64) bool { return false }

func writeCached(*os.File, residency, *atomic.Bool, []byte, int64) bool { return false }
