package mcast

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
)

// TestSenderPutsReadAheadBehindReads hands the Sender a read-ahead request
// and then a read, before its send loop runs: the read's chunks go first,
// and only the read and the first ask (not the repair nor the read-ahead)
// reach OnRead.
func TestSenderPutsReadAheadBehindReads(t *testing.T) {
	var learned []string
	s, err := NewSender(newFakeConn(nil), SenderConfig{Rate: 1 << 30, OnRead: func(_ chunkwire.ContentID, first, last uint32) {
		learned = append(learned, fmt.Sprintf("%d-%d", first, last))
	}})
	if err != nil {
		t.Fatal(err)
	}
	id := chunkwire.ContentID{9}
	const size = 64 * chunkwire.ChunkSize
	if err := s.Add(Content{ID: id, Group: testGroup, Size: size, Data: bytes.NewReader(make([]byte, size))}); err != nil {
		t.Fatal(err)
	}
	all := chunkwire.AllFragments
	for _, req := range []chunkwire.Request{
		{Flags: chunkwire.FlagReadAhead, Ranges: []chunkwire.Range{{First: 20, Count: 3, Mask: all}}},
		{Ranges: []chunkwire.Range{{First: 5, Count: 1, Mask: all}, {First: 21, Count: 1, Mask: all}}},
		{Flags: chunkwire.FlagRepair, Ranges: []chunkwire.Range{{First: 40, Count: 1, Mask: 1}}},
		{Ranges: []chunkwire.Range{{First: 62, Count: 9, Mask: all}}}, // runs past the end
	} {
		req.Content = id
		s.handle(req)
	}
	var sent []uint32
	for {
		j, ok := s.q.next(time.Now(), s.cfg.Suppress)
		if !ok {
			break
		}
		sent = append(sent, j.key.chunk)
	}
	if got, want := fmt.Sprint(sent), "[5 21 40 62 63 20 22]"; got != want {
		t.Errorf("sent chunks %s, want %s: reads and repairs first, read-ahead after", got, want)
	}
	if got, want := fmt.Sprint(learned), "[5-5 21-21 62-63]"; got != want {
		t.Errorf("OnRead got %s, want %s", got, want)
	}
	if st := s.Stats(); st.ReadAhead != 1 || st.Repairs != 1 || st.Requests != 4 {
		t.Errorf("stats %+v, want 4 requests, 1 read-ahead, 1 repair", st)
	}
}

// TestWantAhead: read-ahead asks once, flagged, for what is neither
// cached nor on its way, asks nothing while datagrams wait unread, and a
// read of a chunk asked ahead asks again unflagged, so the Sender moves it
// ahead of the other guesses.
func TestWantAhead(t *testing.T) {
	const size = 8 * chunkwire.ChunkSize
	cache, err := NewMemCache(size, 8)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReceiver(ReceiverConfig{Server: netip.MustParseAddrPort("10.0.0.1:1"), Content: chunkwire.ContentID{1}, Size: size, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	w := &recordRequests{}
	r.out = w
	queued := 0
	r.queued = func() int { return queued }
	buf, _ := cache.Reserve(2)
	cache.Commit(2, len(buf))

	queued = 1
	if got := r.WantAhead([]uint32{4, 5}); len(got) != 0 || len(w.got) != 0 {
		t.Fatalf("with datagrams unread: asked %v, sent %d requests; want none", got, len(w.got))
	}
	queued = 0
	if got := r.WantAhead([]uint32{5, 2, 6, 9, 3}); fmt.Sprint(got) != "[5 6 3]" {
		t.Fatalf("asked %v ahead, want [5 6 3]: 2 is cached, 9 past the end", got)
	}
	if got := r.WantAhead([]uint32{6, 5}); len(got) != 0 {
		t.Fatalf("asked %v, already on their way; want none", got)
	}
	r.Want(6, 1)
	want := []string{
		fmt.Sprintf("flags %d [{5 2 %d} {3 1 %d}]", chunkwire.FlagReadAhead, chunkwire.AllFragments, chunkwire.AllFragments),
		fmt.Sprintf("flags 0 [{6 1 %d}]", chunkwire.AllFragments),
	}
	var got []string
	for _, q := range w.got {
		got = append(got, fmt.Sprintf("flags %d %v", q.Flags, q.Ranges))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := r.Stats(); st.AheadChunks != 3 {
		t.Errorf("AheadChunks %d, want 3", st.AheadChunks)
	}
}
