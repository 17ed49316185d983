package mcast

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestWaitersWithPooledAssemblies: with assemblies and Wait's channels
// reused, every waiter learns how its own chunk ended (a waiter that
// gave up is not told later, two on one chunk both are, a failed chunk's
// waiter gets its error), and the free lists are whole again after.
func TestWaitersWithPooledAssemblies(t *testing.T) {
	const chunks = 4
	id := chunkwire.ContentID{0xb2}
	r, cache := socketlessReceiver(t, id, chunks, chunks, chunks)
	seq := uint32(0)
	deliver := func(chunk uint32) {
		payload := make([]byte, chunkwire.FragmentSize)
		for f := range chunkwire.FragmentsPerChunk {
			d := chunkwire.Data{Content: id, Sender: 1, Seq: seq, Chunk: chunk, Fragment: uint8(f), Payload: payload}
			seq++
			r.datagram(d.Append(nil), arrival{at: time.Now()})
		}
	}
	// wait starts a Wait on chunk and returns where its result arrives,
	// once the Wait is registered on the chunk.
	wait := func(ctx context.Context, chunk uint32) <-chan error {
		out := make(chan error, 1)
		r.mu.Lock()
		before := 0
		if a := r.pend[chunk]; a != nil {
			before = len(a.waiters)
		}
		r.mu.Unlock()
		go func() { out <- r.Wait(ctx, chunk) }()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r.mu.Lock()
			a := r.pend[chunk]
			n := 0
			if a != nil {
				n = len(a.waiters)
			}
			r.mu.Unlock()
			if n > before {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("Wait on chunk %d never registered", chunk)
			}
			time.Sleep(time.Millisecond)
		}
	}
	result := func(what string, ch <-chan error, want error) {
		t.Helper()
		select {
		case err := <-ch:
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Wait did not return", what)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := wait(ctx, 0)
	cancel()
	result("the waiter that gave up", gaveUp, context.Canceled)

	first, second := wait(context.Background(), 0), wait(context.Background(), 0)
	deliver(0)
	result("first waiter on chunk 0", first, nil)
	result("second waiter on chunk 0", second, nil)

	failed := wait(context.Background(), 1)
	r.mu.Lock()
	r.fail(1, ErrLossy)
	r.mu.Unlock()
	result("waiter on the failed chunk 1", failed, ErrLossy)

	// Chunk 2 reuses an assembly and a channel: only its own waiter hears.
	third := wait(context.Background(), 2)
	deliver(2)
	result("waiter on chunk 2", third, nil)

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pend) != 0 || len(r.free) != chunks || len(r.waitChans) != preallocChans {
		t.Fatalf("%d assemblies pending, %d free (want %d), %d wait channels free (want %d)",
			len(r.pend), len(r.free), chunks, len(r.waitChans), preallocChans)
	}
	for i, ch := range r.waitChans {
		if len(ch) != 0 {
			t.Fatalf("wait channel %d holds a result nobody took", i)
		}
	}
	if !cache.Has(0) || !cache.Has(2) || cache.Has(1) {
		t.Fatalf("cache holds chunks 0, 1, 2: %v %v %v; want 0 and 2", cache.Has(0), cache.Has(1), cache.Has(2))
	}
}
