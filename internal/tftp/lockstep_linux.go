//go:build linux

package tftp

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Lockstep transfers (windowsize 1, what BIOS PXE ROMs and most UEFI NIC
// drivers ask for) wait one round trip per block, so the time from ACK
// received to DATA sent is the whole figure. Through the Go netpoller an ACK
// costs a read that may fail with EAGAIN, a park, an epoll_wait on whichever
// thread polls, a wakeup and a reschedule: 1.4 reads and 0.7 epoll_pwaits
// per block besides the send, counted with perf stat in
// BenchmarkLockstepAtftp. A blocking recv on a socket the netpoller does not
// watch is one system call, and the kernel wakes the very thread that waits:
// the time from the ACK's arrival to the DATA send halves (the lockstep A/B
// in BENCHMARKS-transfer.md). The cost is an OS thread held for the whole
// transfer, hence Config.LockstepThreads.

// blockingConn is a transfer socket taken out of the netpoller and switched
// to blocking mode: Read is one recv that sleeps in the kernel until a
// datagram or the deadline, Write and writeData one send. It implements
// transferConn and dataWriter. Only the transfer's goroutine may call its
// methods, except shutdown, which any goroutine may call to end it.
type blockingConn struct {
	fd       int
	deadline time.Time
	// rcvtimeo is the SO_RCVTIMEO now set. It is changed only when the
	// time left to the deadline is well away from it, so that a steady
	// retransmission timeout costs no setsockopt per block.
	rcvtimeo time.Duration
	iov      [2]unix.Iovec
	yielded  time.Time // last runtime.Gosched, see Read

	mu     sync.Mutex // orders shutdown against close
	closed bool       // fd closed
	down   bool       // shut down: reads fail with net.ErrClosed
}

// detachBlocking takes c's socket out of the netpoller: it duplicates the
// descriptor, closes c (which removes it from the runtime's epoll set, so
// ACKs no longer wake a polling thread) and makes the duplicate blocking.
// c must not be used afterwards, except Close and SetReadDeadline, which
// then do nothing.
func detachBlocking(c *net.UDPConn) (lockstepIO, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("raw socket access: %w", err)
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("raw socket access: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("duplicating the transfer socket: %w", derr)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("making the transfer socket blocking: %w", err)
	}
	c.Close()
	return &blockingConn{fd: fd}, nil
}

func (c *blockingConn) SetReadDeadline(t time.Time) error {
	c.deadline = t
	return nil
}

// yieldEvery is well under the runtime's 10 ms preemption slice.
const yieldEvery = 2 * time.Millisecond

// rcvtimeoSlack is how much later than the deadline a read may time out
// rather than pay a setsockopt: the timer it stands for is tens of
// milliseconds or more, and firing it a little late only delays a
// retransmission that loss already delayed.
func rcvtimeoSlack(left time.Duration) time.Duration { return max(time.Millisecond, left/16) }

func (c *blockingConn) Read(b []byte) (int, error) {
	for {
		var left time.Duration // 0: no deadline, wait for ever
		if !c.deadline.IsZero() {
			if left = time.Until(c.deadline); left <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
		}
		if left != c.rcvtimeo && (left == 0 || c.rcvtimeo == 0 || c.rcvtimeo > left+rcvtimeoSlack(left) || c.rcvtimeo < left/2) {
			var tv unix.Timeval // zero: no timeout
			if left > 0 {
				tv = unix.NsecToTimeval(left.Nanoseconds() + 999) // rounded up, never to zero
			}
			if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				return 0, fmt.Errorf("setting the receive timeout: %w", err)
			}
			c.rcvtimeo = left
		}
		if now := time.Now(); now.Sub(c.yielded) > yieldEvery {
			// A goroutine that never parks looks to the runtime's monitor
			// like one running for ever: after 10 ms it forces a preemption
			// and takes the processor away while recv sleeps, then polls
			// every 20 µs for a millisecond, several thousand wakeups a
			// second on another core. Yielding now and then shows it
			// progress.
			c.yielded = now
			runtime.Gosched()
		}
		n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0, 0, 0)
		runtime.KeepAlive(b)
		switch errno {
		case 0:
			if n == 0 && c.isDown() {
				return 0, net.ErrClosed
			}
			return int(n), nil
		case unix.EAGAIN, unix.EINTR:
			// A timeout, early when rcvtimeo was shorter than the time left,
			// or a signal: the loop decides by the clock.
			if c.isDown() {
				return 0, net.ErrClosed
			}
		default:
			return 0, os.NewSyscallError("recvfrom", errno)
		}
	}
}

func (c *blockingConn) Write(b []byte) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0, 0, 0)
		runtime.KeepAlive(b)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, os.NewSyscallError("sendto", errno)
		}
		return int(n), nil
	}
}

// writeData sends each packet with one writev of its header and payload,
// so the payload goes from the cache to the kernel without a copy.
func (c *blockingConn) writeData(pkts []dataPacket) error {
	for i := range pkts {
		p := &pkts[i]
		c.iov[0] = unix.Iovec{Base: &p.hdr[0]}
		c.iov[0].SetLen(len(p.hdr))
		niov := 1
		if len(p.payload) > 0 {
			c.iov[1] = unix.Iovec{Base: &p.payload[0]}
			c.iov[1].SetLen(len(p.payload))
			niov = 2
		}
		for {
			_, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&c.iov[0])), uintptr(niov))
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 && !isTransient(errno) {
				return fmt.Errorf("sending DATA: %w", os.NewSyscallError("writev", errno))
			}
			break
		}
		runtime.KeepAlive(p)
	}
	return nil
}

func (c *blockingConn) isDown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down
}

// shutdown wakes a Read blocked in the kernel and makes every later one
// fail: closing the descriptor would not wake it, and could hand its number
// to another socket while it sleeps.
func (c *blockingConn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.down {
		return
	}
	c.down = true
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
}

// Close releases the descriptor. Call it from the transfer's goroutine once
// nothing reads any more.
func (c *blockingConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return unix.Close(c.fd)
}

var _ lockstepIO = (*blockingConn)(nil)
