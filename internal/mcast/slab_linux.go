package mcast

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// hugeSlabMin is the slab size from which newSlab maps memory of its own:
// below it, the Go heap is as good.
const hugeSlabMin = 4 << 20

// newSlab returns n zeroed bytes for a cache's slots. A large slab is an
// anonymous mapping the kernel may back with transparent huge pages, so
// filling it faults once per 2 MiB rather than once per 4 KiB page: a
// storm of hundreds of emulated machines spent most of its time in those
// faults, and the agent's CPU is the boot's. owner's cleanup unmaps it.
func newSlab[T any](owner *T, n int) []byte {
	if n < hugeSlabMin {
		return make([]byte, n)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	// Without transparent huge pages (or with them off) the mapping is
	// still good memory.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	runtime.AddCleanup(owner, func(b []byte) { unix.Munmap(b) }, b)
	return b
}
