package mcast

import (
	"fmt"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

func TestQueueMergesAndSuppresses(t *testing.T) {
	const suppress = 20 * time.Millisecond
	id := chunkwire.ContentID{1}
	k := func(c uint32) chunkKey { return chunkKey{id, c} }
	now := time.Unix(100, 0)
	q := newQueue()
	if added, merged := q.add(k(5), 0b0011, false, false, now, suppress); !added || merged {
		t.Fatalf("first ask: added %v merged %v", added, merged)
	}
	if added, merged := q.add(k(5), 0b0100, false, false, now, suppress); !added || !merged {
		t.Fatalf("second ask of a queued chunk: added %v merged %v, want a merge", added, merged)
	}
	q.add(k(6), chunkwire.AllFragments, false, false, now, suppress)
	j, ok := q.next(now, suppress)
	if !ok || j.key != k(5) || j.mask != 0b0111 {
		t.Fatalf("next: %+v %v, want chunk 5 with the merged mask 0b111", j, ok)
	}
	// Chunk 5's datagrams are in flight: an ask for them is dropped, one
	// for another fragment or a repair is not.
	if added, _ := q.add(k(5), 0b0001, false, false, now.Add(suppress/2), suppress); added {
		t.Fatal("an ask crossing the datagrams it wants was queued")
	}
	if added, _ := q.add(k(5), 0b1000, false, false, now.Add(suppress/2), suppress); !added {
		t.Fatal("an ask for a fragment not sent was dropped")
	}
	if added, _ := q.add(k(5), 0b0001, true, false, now.Add(suppress/2), suppress); !added {
		t.Fatal("a repair was dropped")
	}
	if j, _ := q.next(now, suppress); j.key != k(6) {
		t.Fatalf("next: chunk %d, want 6, asked before the second pass of 5", j.key.chunk)
	}
	if j, _ := q.next(now, suppress); j.key != k(5) || j.mask != 0b1001 {
		t.Fatalf("next: %+v, want chunk 5 with 0b1001", j)
	}
	q.add(k(7), 1, false, false, now, suppress)
	q.drop(id)
	if _, ok := q.next(now, suppress); ok {
		t.Fatal("a job of a dropped content was left")
	}
}

func TestQueueSendsReadAheadBehindReads(t *testing.T) {
	const suppress = 20 * time.Millisecond
	id := chunkwire.ContentID{2}
	now := time.Unix(100, 0)
	for _, tc := range []struct {
		name string
		asks []struct {
			chunk uint32
			ahead bool
		}
		want []uint32
	}{
		{"reads first", []struct {
			chunk uint32
			ahead bool
		}{{10, true}, {11, true}, {3, false}, {12, true}, {4, false}}, []uint32{3, 4, 10, 11, 12}},
		// A read of a chunk waiting as read-ahead takes its place among
		// the reads, and is sent once.
		{"read promotes", []struct {
			chunk uint32
			ahead bool
		}{{10, true}, {11, true}, {1, false}, {11, false}}, []uint32{1, 11, 10}},
		{"read-ahead of a queued read stays a read", []struct {
			chunk uint32
			ahead bool
		}{{1, false}, {2, true}, {1, true}}, []uint32{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue()
			for _, a := range tc.asks {
				q.add(chunkKey{id, a.chunk}, chunkwire.AllFragments, false, a.ahead, now, suppress)
			}
			var got []uint32
			for {
				j, ok := q.next(now, suppress)
				if !ok {
					break
				}
				got = append(got, j.key.chunk)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("sent %v, want %v", got, tc.want)
			}
		})
	}
}
