package nbd

import (
	"sync"
	"sync/atomic"
)

// workers are the session's request workers, started as load needs them
// and kept for the session, so a request costs a channel hand-off instead
// of a new goroutine with a stack to grow.
type workers struct {
	ss   *session
	jobs chan job
	idle atomic.Int32
	n    int
	wg   sync.WaitGroup
}

func (ss *session) startWorkers() *workers {
	return &workers{ss: ss, jobs: make(chan job)}
}

// run hands j to an idle worker, starting one if none is idle and the
// limit allows, else waiting for one.
func (w *workers) run(j job) {
	if w.idle.Load() == 0 && w.n < w.ss.srv.cfg.MaxInFlight {
		w.n++
		w.wg.Add(1)
		go w.work()
	}
	select {
	case w.jobs <- j:
	default:
		w.ss.flush()
		w.jobs <- j
	}
	// The hand-off took a worker that had said it was idle. Only this
	// loop takes the count down: a worker doing it after its receive left
	// a window where the next request saw it still idle, started no
	// worker, and waited for it, stuck in a reply the client was not
	// reading yet.
	w.idle.Add(-1)
}

// stop lets in-flight requests finish (after DISC, errors and shutdown
// alike) and sends what the loop held back.
func (w *workers) stop() {
	w.ss.flush()
	close(w.jobs)
	w.wg.Wait()
}

func (w *workers) work() {
	defer w.wg.Done()
	for {
		w.idle.Add(1) // run takes it back when it hands over a job
		j, ok := <-w.jobs
		if !ok {
			return
		}
		w.ss.handle(j)
		putBuf(j.payload)
	}
}
