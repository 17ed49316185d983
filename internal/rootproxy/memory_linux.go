package rootproxy

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// HardenForIO prepares the calling process to serve the root's block
// device: the kernel may need the root's I/O done to free memory, so
// the process that does it must not wait on that reclaim itself.
//
//   - PR_SET_IO_FLUSHER (Linux 5.6): the kernel's allocations on behalf of
//     this process do no I/O to reclaim, and it is not throttled as a
//     dirtying writer, as for loop, nbd-client and FUSE daemons;
//   - mlockall(MCL_CURRENT|MCL_FUTURE): none of its pages (the binary,
//     the Go heap, the read cache allocated before this call) is paged
//     out, so a read never faults on a page that would come back through
//     the device it serves.
//
// Go's own allocations on the read path cannot be made reclaim-free; the
// proxy keeps them few by preallocating its cache and span buffers, and
// nbd's server pools its request buffers.
func HardenForIO() error {
	var errs []error
	if err := unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("prctl(PR_SET_IO_FLUSHER): %w (Linux 5.6 or later, and CAP_SYS_RESOURCE)", err))
	}
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
		errs = append(errs, fmt.Errorf("mlockall: %w (RLIMIT_MEMLOCK, or CAP_IPC_LOCK)", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("rootproxy: %v", errs)
	}
	return nil
}
