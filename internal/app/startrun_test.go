package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/config"
)

// stopWithin is how long Run may take to return once cancelled: it
// closes every listener and waits for in-flight work.
const stopWithin = 15 * time.Second

// running is a Run started by startRun, and the log it writes.
type running struct {
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	ended  bool
	err    error
}

// startRun runs c as Run does in `bootfleet serve`, logging to the
// returned running's logs, and stops it when the test ends: a Run that
// does not return then fails the test.
func startRun(t *testing.T, c *config.Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(r.logs, nil))
	go func() { r.done <- Run(ctx, c, log) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and returns what it returned.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t, stopWithin)
}

// wait returns what Run returned, failing t if it has not within d.
func (r *running) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	if r.ended {
		return r.err
	}
	select {
	case r.err = <-r.done:
		r.ended = true
		return r.err
	case <-time.After(d):
		t.Fatalf("Run has not returned within %v", d)
		return nil
	}
}
