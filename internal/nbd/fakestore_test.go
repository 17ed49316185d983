package nbd

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
)

// answer is how the fake Store answers one READ.
type answer int

const (
	fillP    answer = iota // the server's buffer, filled
	ownBytes               // bytes of the store's own, as an image's mapping
	fileSpan               // a span of the store's file, for sendfile
	toWorker               // ReadNow only: not now, a worker asks ReadSpan
	failRead               // ReadSpan only: a read error
	answers                // how many answers there are
)

// WriteNow's answers.
const (
	takeWrite int32 = iota
	refuseWrite
	halfWrite // write half of p, then refuse
)

// fakeStore is an Export over a file whose Store answers each READ as the
// test's now and later say, counting the answers, so that the tests see
// what the server does with every kind of answer. Which answer storage
// should give is blockstore's choice, tested there. File spans must not
// change before their replies leave, so tests write only where they do
// not read.
type fakeStore struct {
	f          *os.File
	size       int64
	now, later func(off, n int64) answer // ReadNow's and ReadSpan's answers
	writeNow   atomic.Int32

	nowAnswers, laterAnswers     [answers]atomic.Int64
	noFiles                      atomic.Int64 // ReadNow calls that may not answer with a file span
	writesNow, writeAts          atomic.Int64
	flushes, writeAtsBeforeFlush atomic.Int64
}

func always(a answer) func(off, n int64) answer { return func(int64, int64) answer { return a } }

// newFakeStore holds content; ReadNow fills the server's buffer and
// ReadSpan does too until the test says otherwise.
func newFakeStore(t *testing.T, content []byte) *fakeStore {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "export")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	return &fakeStore{f: f, size: int64(len(content)), now: always(fillP), later: always(fillP)}
}

func (e *fakeStore) ReadNow(p []byte, off int64, files bool) (Span, bool) {
	a := e.now(off, int64(len(p)))
	if a == fileSpan && !files {
		e.noFiles.Add(1)
		a = fillP
	}
	var s Span
	switch a {
	case fillP:
		if err := ReadFull(e.f, p, off); err != nil {
			return Span{}, false
		}
		s.Bytes = p
	case ownBytes:
		b, err := e.copyOf(off, int64(len(p)))
		if err != nil {
			return Span{}, false
		}
		s.Bytes = b
	case fileSpan:
		s.File, s.FileOff = e.f, off
	}
	e.nowAnswers[a].Add(1)
	return s, a != toWorker
}

func (e *fakeStore) ReadSpan(p []byte, off int64) (Span, error) {
	a := e.later(off, int64(len(p)))
	e.laterAnswers[a].Add(1)
	switch a {
	case ownBytes:
		b, err := e.copyOf(off, int64(len(p)))
		return Span{Bytes: b}, err
	case failRead:
		return Span{}, fmt.Errorf("fake store: read at %d: %w", off, syscall.EIO)
	}
	if err := ReadFull(e.f, p, off); err != nil {
		return Span{}, err
	}
	return Span{Bytes: p}, nil
}

func (e *fakeStore) WriteNow(p []byte, off int64) bool {
	switch e.writeNow.Load() {
	case refuseWrite:
		return false
	case halfWrite:
		e.f.WriteAt(p[:len(p)/2], off)
		return false
	}
	if _, err := e.f.WriteAt(p, off); err != nil {
		return false
	}
	e.writesNow.Add(1)
	return true
}

func (e *fakeStore) WriteAt(p []byte, off int64) (int, error) {
	e.writeAts.Add(1)
	return e.f.WriteAt(p, off)
}

func (e *fakeStore) Flush() error {
	e.writeAtsBeforeFlush.Store(e.writeAts.Load())
	e.flushes.Add(1)
	return nil
}

func (e *fakeStore) Info() ExportInfo                     { return ExportInfo{Size: e.size} }
func (e *fakeStore) Trim(int64, int64) error              { return nil }
func (e *fakeStore) WriteZeroes(int64, int64, bool) error { return nil }
func (e *fakeStore) Close() error                         { return nil }

// copyOf is the file's n bytes at off, in memory as a mapping's are.
func (e *fakeStore) copyOf(off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if err := ReadFull(e.f, b, off); err != nil {
		return nil, fmt.Errorf("fake store: copy %d bytes at %d: %w", n, off, err)
	}
	return b, nil
}

// counts is how many READs ReadNow and ReadSpan answered each way.
func (e *fakeStore) counts() (now, later [answers]int64) {
	for a := range answers {
		now[a], later[a] = e.nowAnswers[a].Load(), e.laterAnswers[a].Load()
	}
	return now, later
}

// content reads the file behind the server's back.
func (e *fakeStore) content(t *testing.T, off, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := e.f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}
