package blockstore

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// streams turns the loads of a sequential reader into one sequential read
// of the file. The nbd server hands each large READ to its own worker, so
// a client reading an image front to back has dozens of loads of adjacent
// ranges in flight at once, and each reading its own range made the
// kernel's readahead see interleaved, partly random reads. A load that
// starts inside, or just past, a range some stream is loading joins that
// stream and waits for it; the stream's goroutine reads its range in order
// through a file description of its own (its own readahead state), as dd
// would, and once its loads have shown it sequential it reads ahead of
// them (stream.lead). Loads far from every stream start a new one, so
// scattered large reads (a machine booting) still go to the disk in
// parallel, and every machine reading the same image shares the streams,
// as it shares the page cache.
type streams struct {
	// file is the image. Holding it keeps its descriptor open (no
	// finalizer) while a stream still reads; Image.Close closes it only
	// after close has stopped them.
	file *os.File
	size int64
	// fresh is how long a stopped stream vouches for its pages
	// (streamFresh; tests make it longer).
	fresh time.Duration
	mu    sync.Mutex
	all   []*stream
	tick  uint64 // last use, for evicting the least recently used idle stream
	wg    sync.WaitGroup
	shut  bool
}

// stream is one range being loaded in order: loads have asked for
// [start, asked), [start, done) is in the page cache, and the stream reads
// on to streams.target, its lead past asked.
type stream struct {
	start, done, asked int64
	idle               time.Time // when it stopped running
	fd                 int       // its own open file description, or -1 until opened
	running            bool
	failed             bool
	used               uint64
	moved              *sync.Cond // on streams.mu: done, failed or running changed
}

const (
	// maxStreams bounds the streams of one image and their descriptors.
	// A load finding every stream busy reads its range itself.
	maxStreams = 32
	// streamSlack is how far past a stream's end a load may start and still
	// join it: the workers of one client call in roughly, not exactly,
	// request order. The stream reads the gap, which readahead would
	// have read anyway.
	streamSlack = 2 << 20
	// streamBehind is how far behind the loads of a stream a load may
	// start and still join it, taking those pages as loaded: more than
	// one client keeps in flight (nbdcopy: 64 READs of 256 KiB).
	streamBehind = 32 << 20
	// streamFresh is how long a stopped stream vouches for its pages.
	streamFresh = time.Second
	// minLead and maxLead bound a stream's read ahead (stream.lead).
	minLead, maxLead = 1 << 20, 8 << 20
	// streamStep is what the stream's goroutine reads per system call:
	// waiters are released at this granularity; the kernel's readahead,
	// not this, sets the size of the disk reads.
	streamStep = 256 << 10
)

func newStreams(f *os.File, size int64) *streams {
	return &streams{file: f, size: size, fresh: streamFresh}
}

// load returns once [off, off+n) is in the page cache, false if reading it
// failed (the caller then reads it the ordinary way, which reports the
// error).
func (ss *streams) load(off, n int64) bool {
	end := off + n
	ss.mu.Lock()
	s := ss.join(off)
	if s == nil {
		ss.mu.Unlock()
		return ss.pull(-1, off, n) == nil
	}
	s.asked = max(s.asked, end)
	if !s.running {
		s.running = true
		ss.wg.Add(1)
		go ss.run(s)
	}
	for s.done < end && !s.failed {
		s.moved.Wait()
	}
	ok := s.done >= end
	ss.mu.Unlock()
	return ok
}

// join finds the stream a load at off continues, or starts one; nil when
// every stream is busy or the image is closing. Called with mu held.
func (ss *streams) join(off int64) *stream {
	if ss.shut {
		return nil
	}
	ss.tick++
	stale := time.Now().Add(-ss.fresh)
	idle := -1
	for i, s := range ss.all {
		if s.takes(off, stale) {
			s.used = ss.tick
			return s
		}
		if !s.running && (idle < 0 || s.used < ss.all[idle].used) {
			idle = i
		}
	}
	s := &stream{start: off, done: off, asked: off, fd: -1, used: ss.tick}
	s.moved = sync.NewCond(&ss.mu)
	switch {
	case len(ss.all) < maxStreams:
		ss.all = append(ss.all, s)
	case idle >= 0:
		// An idle stream has no waiters left, except a failed one's,
		// which keep their pointer to it and see it failed.
		closeFD(ss.all[idle].fd)
		ss.all[idle] = s
	default:
		return nil
	}
	return s
}

// takes says whether a load at off joins s: it starts where the loads
// of s have got to, or a little before or after. Only a stream running, or
// stopped since stale, vouches for the pages behind it: a machine booting
// again the next day finds them long gone from the page cache, so a load
// then starts a new stream, which reads what is gone as one sequential
// read.
func (s *stream) takes(off int64, stale time.Time) bool {
	if s.failed || (!s.running && s.idle.Before(stale)) {
		return false
	}
	return max(s.start, s.asked-streamBehind) <= off && off <= s.asked+streamSlack
}

// lead is how far past what its loads asked for s reads ahead: nothing
// until it has loaded minLead in order, then as much as it has loaded, up
// to maxLead. The kernel's own readahead stays within the reads it is
// asked for, plus read_ahead_kb; this keeps the disk busy while the client
// takes the replies, and a short sequential run wastes at most what it
// read.
func (s *stream) lead() int64 {
	if run := s.asked - s.start; run >= minLead {
		return min(run, maxLead)
	}
	return 0
}

// target is where s stops reading: its lead past what its loads asked
// for, within the image. A load past the image's end is read as asked,
// and fails.
func (ss *streams) target(s *stream) int64 {
	return max(s.asked, min(s.asked+s.lead(), ss.size))
}

// run reads the stream's range in order until it reaches its target.
func (ss *streams) run(s *stream) {
	defer ss.wg.Done()
	ss.mu.Lock()
	if s.fd < 0 {
		ss.mu.Unlock()
		fd := ss.reopen()
		ss.mu.Lock()
		s.fd = fd
	}
	for to := ss.target(s); s.done < to && !s.failed && !ss.shut; to = ss.target(s) {
		from, k := s.done, min(to-s.done, streamStep)
		ss.mu.Unlock()
		err := ss.pull(s.fd, from, k)
		ss.mu.Lock()
		if err != nil {
			s.failed = true
		} else {
			s.done = from + k
		}
		s.moved.Broadcast()
	}
	if ss.shut {
		s.failed = true // its waiters read for themselves
	}
	s.running = false
	s.idle = time.Now()
	s.moved.Broadcast()
	ss.mu.Unlock()
}

// reopen opens the image again, for a file description (and readahead
// state) of a stream's own; -1 if it cannot, and the stream then reads
// through the image's own descriptor.
func (ss *streams) reopen() int {
	fd := -1
	control(ss.file, func(own int) {
		if f, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", own), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			fd = f
		}
	})
	return fd
}

// pull reads [off, off+n) into the page cache through fd, or through the
// image's descriptor when fd is -1.
func (ss *streams) pull(fd int, off, n int64) error {
	if fd >= 0 {
		return sendToNull(fd, off, n)
	}
	var err error
	if cerr := control(ss.file, func(own int) { err = sendToNull(own, off, n) }); cerr != nil {
		return cerr
	}
	return err
}

// close stops every stream and closes their descriptors.
func (ss *streams) close() {
	ss.mu.Lock()
	ss.shut = true
	ss.mu.Unlock()
	ss.wg.Wait()
	for _, s := range ss.all {
		closeFD(s.fd)
	}
	ss.all = nil
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// sendToNull brings [off, off+n) of fd into the page cache with
// sendfile(2) to /dev/null: read(2)'s path, readahead included, without
// copying the bytes anywhere.
func sendToNull(fd int, off, n int64) error {
	null, err := devNull()
	if err != nil {
		return err
	}
	for o, left := off, int(n); left > 0; {
		k, err := unix.Sendfile(null, fd, &o, left)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case k == 0:
			return io.ErrUnexpectedEOF
		}
		left -= k
	}
	return nil
}

// devNull is /dev/null opened for writing, once per process.
var devNull = sync.OnceValues(func() (int, error) {
	return unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0)
})
