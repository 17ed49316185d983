package readorder

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// flushAfter is how long a content's order may hold chunks not yet in
// its file: a boot reads in bursts, and a file per read would be a write
// per read.
const flushAfter = 2 * time.Second

// Learner keeps the read order of each content. The order is first
// seen, first ranked: the first boot of a content lays it down, and a
// later boot only appends the chunks no boot read before, so one odd boot
// (a fsck, a different kernel command line) adds at most its own novelty
// at the end and never reorders what the earlier boots agreed on.
// Safe for concurrent use.
type Learner struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	contents map[string]*learned // by sha256
	// wmu keeps one flush at a time, so an older order never renames
	// itself over a newer one.
	wmu sync.Mutex
}

// learned is one content's order.
type learned struct {
	order   []uint32
	seen    map[uint32]struct{}
	written int         // chunks of order in the file
	timer   *time.Timer // pending flush; nil when none
}

// NewLearner keeps orders in dir (DATA/images/order), one file per
// content named by its sha256. log gets failed writes; nil discards.
func NewLearner(dir string, log *slog.Logger) *Learner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Learner{dir: dir, log: log, contents: map[string]*learned{}}
}

// load returns sha's order, from its file the first time. l.mu is held.
func (l *Learner) load(sha string) *learned {
	if c := l.contents[sha]; c != nil {
		return c
	}
	c := &learned{seen: map[uint32]struct{}{}}
	b, err := os.ReadFile(filepath.Join(l.dir, sha))
	if err == nil {
		if c.order, err = Decode(b); err != nil {
			// A damaged file is relearned from the next boot.
			l.log.Warn("read order file unreadable; learning it again", "sha256", sha, "err", err)
			c.order = nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("read order file unreadable; learning it again", "sha256", sha, "err", err)
	}
	for _, ch := range c.order {
		c.seen[ch] = struct{}{}
	}
	c.written = len(c.order)
	l.contents[sha] = c
	return c
}

// Note records that a boot of content sha read chunks first..last, in
// that order; chunks read before by any boot keep their rank.
func (l *Learner) Note(sha string, first, last uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.load(sha)
	for ch := first; ch <= last && len(c.order) < MaxChunks; ch++ {
		if _, ok := c.seen[ch]; ok {
			continue
		}
		c.seen[ch] = struct{}{}
		c.order = append(c.order, ch)
		if c.timer == nil {
			c.timer = time.AfterFunc(flushAfter, func() { l.flush(sha) })
		}
		if ch == last {
			break // last may be the largest uint32
		}
	}
}

// Order returns the file of content sha's order (Encode); false when no
// boot of it was seen.
func (l *Learner) Order(sha string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.load(sha)
	if len(c.order) == 0 {
		return nil, false
	}
	return Encode(c.order), true
}

// Flush writes every order with chunks not yet in its file, now.
func (l *Learner) Flush() {
	l.mu.Lock()
	shas := make([]string, 0, len(l.contents))
	for sha := range l.contents {
		shas = append(shas, sha)
	}
	l.mu.Unlock()
	for _, sha := range shas {
		l.flush(sha)
	}
}

func (l *Learner) flush(sha string) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	c := l.contents[sha]
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.written == len(c.order) {
		l.mu.Unlock()
		return
	}
	b, n := Encode(c.order), len(c.order)
	l.mu.Unlock()
	if err := writeAtomic(filepath.Join(l.dir, sha), b); err != nil {
		l.log.Warn("read order not saved; the next boots of this content read ahead less", "sha256", sha, "err", err)
		return
	}
	l.mu.Lock()
	c.written = max(c.written, n)
	l.mu.Unlock()
}

// writeAtomic replaces path with b so that a reader sees the old file or
// the new, never half of one.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".order-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write read order %s: %w", path, err)
	}
	return nil
}
