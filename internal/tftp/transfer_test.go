package tftp

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTransfers(t *testing.T) {
	fsys := newMapFS()
	files := map[string][]byte{
		"small":    randBytes(1, 3000),
		"empty":    {},
		"exact512": randBytes(2, 512*8),
		"exact1k":  randBytes(3, 1024*5),
		"medium":   randBytes(4, 300_000),
		"text":     []byte("line1\nline2\r\nbare\rcr\n"),
	}
	for n, d := range files {
		fsys.put(n, d)
	}
	// A floor of 1 s on the RTO: the adaptive one shrinks to 50 ms on
	// loopback, and a busy host that keeps the client off the CPU that long
	// gets a window resent, which is the timer working, not a transfer bug.
	addr, rec, _ := startServer(t, Config{FS: fsys, MinTimeout: time.Second})
	tests := []struct {
		name     string
		file     string
		mode     string
		opts     []string
		wantOACK []Option // nil: the first packet must be DATA 1
		wantBlk  int
		wantWin  int
		want     []byte // default files[file]
	}{
		{name: "no options", file: "small", wantBlk: 512, wantWin: 1},
		{name: "empty file", file: "empty", wantBlk: 512, wantWin: 1},
		{name: "exact multiple of 512", file: "exact512", wantBlk: 512, wantWin: 1},
		{name: "blksize 1024", file: "exact1k", opts: []string{"blksize", "1024"},
			wantOACK: []Option{{"blksize", "1024"}}, wantBlk: 1024, wantWin: 1},
		{name: "blksize 1456 windowsize 16", file: "medium", opts: []string{"blksize", "1456", "windowsize", "16"},
			wantOACK: []Option{{"blksize", "1456"}, {"windowsize", "16"}}, wantBlk: 1456, wantWin: 16},
		{name: "windowsize 64", file: "medium", opts: []string{"windowsize", "64"},
			wantOACK: []Option{{"windowsize", "64"}}, wantBlk: 512, wantWin: 64},
		{name: "windowsize clamped to MaxWindow", file: "medium", opts: []string{"windowsize", "1000"},
			wantOACK: []Option{{"windowsize", "64"}}, wantBlk: 512, wantWin: 64},
		{name: "tsize", file: "medium", opts: []string{"tsize", "0"},
			wantOACK: []Option{{"tsize", "300000"}}, wantBlk: 512, wantWin: 1},
		{name: "timeout and case-insensitive names", file: "small", opts: []string{"TIMEOUT", "3", "BlkSize", "700"},
			wantOACK: []Option{{"TIMEOUT", "3"}, {"BlkSize", "700"}}, wantBlk: 700, wantWin: 1},
		{name: "unknown options only: no OACK", file: "small", opts: []string{"multicast", "", "foo", "bar"},
			wantBlk: 512, wantWin: 1},
		{name: "unknown option ignored beside known", file: "small", opts: []string{"foo", "bar", "tsize", "0"},
			wantOACK: []Option{{"tsize", "3000"}}, wantBlk: 512, wantWin: 1},
		{name: "invalid timeout not acknowledged", file: "small", opts: []string{"timeout", "0", "tsize", "0"},
			wantOACK: []Option{{"tsize", "3000"}}, wantBlk: 512, wantWin: 1},
		{name: "leading slash", file: "/small", want: files["small"], wantBlk: 512, wantWin: 1},
		{name: "netascii", file: "text", mode: "NetASCII", want: []byte("line1\r\nline2\r\x00\r\nbare\r\x00cr\r\n"), wantBlk: 512, wantWin: 1},
	}
	fsys.put("/small", files["small"])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(addr).withOpts(tt.opts...)
			if tt.mode != "" {
				c.mode = tt.mode
			}
			got, err := c.get(testCtx(t, 20*time.Second), tt.file)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == nil {
				want = files[tt.file]
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("content differs: got %d bytes, want %d", len(got), len(want))
			}
			if fmt.Sprint(c.oack) != fmt.Sprint(tt.wantOACK) {
				t.Errorf("OACK = %v, want %v", c.oack, tt.wantOACK)
			}
			if tt.wantOACK == nil && (len(c.trace) == 0 || c.trace[0] != 1) {
				t.Errorf("first DATA = %v, want block 1 without OACK", c.trace[:min(1, len(c.trace))])
			}
			st := rec.next(t)
			if st.Err != nil || st.Bytes != int64(len(want)) || st.BlockSize != tt.wantBlk || st.WindowSize != tt.wantWin || st.Retransmits != 0 {
				t.Errorf("stats = %+v, want no error, %d bytes, blksize %d, windowsize %d, 0 retransmits", st, len(want), tt.wantBlk, tt.wantWin)
			}
		})
	}
}

// TestRollover sends a file of more than 65535 blocks, so block numbers wrap
// from 65535 to 0, lockstep and windowed.
func TestRollover(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(7, 65537*512+100) // 65538 blocks: wraps, ends on block 1 after the wrap
	fsys.put("big", data)
	addr, rec, _ := startServer(t, Config{FS: fsys})
	for _, tt := range []struct {
		name string
		opts []string
	}{
		{"windowsize 64", []string{"windowsize", "64"}},
		{"lockstep", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opts == nil && testing.Short() {
				t.Skip("lockstep rollover takes a few seconds")
			}
			c := newTestClient(addr).withOpts(tt.opts...)
			got, err := c.get(testCtx(t, 60*time.Second), "big")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("content differs: got %d bytes, want %d", len(got), len(data))
			}
			last := c.trace[len(c.trace)-1]
			if last != 65538 {
				t.Fatalf("last block index %d, want 65538", last)
			}
			if st := rec.next(t); st.Err != nil || st.Bytes != int64(len(data)) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestLossRecovery drops chosen DATA packets and checks the sender goes back
// to exactly the first missing block, by each of the two recovery paths.
func TestLossRecovery(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(9, 200*512+17)
	fsys.put("f", data)
	addr, rec, _ := startServer(t, Config{FS: fsys, Timeout: 300 * time.Millisecond})
	type drop struct {
		block   uint64
		arrival int // 0: first time the block arrives
	}
	tests := []struct {
		name     string
		opts     []string
		drops    []drop
		wantBack []uint64 // blocks where retransmission restarted
	}{
		// A gap inside a window: the client ACKs block 36 on seeing 38; the
		// sender restarts at 37 at once (no timeout).
		{"gap ack mid-window", []string{"windowsize", "16"}, []drop{{37, 0}}, []uint64{37}},
		// The last block of a window: nothing reveals the gap, the server
		// times out and goes back to the block after the last ACK (32).
		{"timeout at window end", []string{"windowsize", "16"}, []drop{{48, 0}}, []uint64{33}},
		// One go-back recovers every loss of the window.
		{"two losses in one window", []string{"windowsize", "16"}, []drop{{20, 0}, {25, 0}}, []uint64{20}},
		// A loss in the retransmitted window starts another go-back.
		{"loss in the retransmission", []string{"windowsize", "16"}, []drop{{20, 0}, {25, 1}}, []uint64{20, 25}},
		{"lockstep timeout", nil, []drop{{5, 0}}, []uint64{5}},
		{"last block of file", []string{"windowsize", "16"}, []drop{{201, 0}}, []uint64{193}},
		{"retransmission lost too", []string{"windowsize", "8"}, []drop{{8, 0}, {8, 1}}, []uint64{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(addr).withOpts(tt.opts...)
			c.timeout = 5 * time.Second // the server, not the client, must recover
			drops := map[drop]bool{}
			for _, d := range tt.drops {
				drops[d] = true
			}
			c.drop = func(idx uint64, seen int) bool { return drops[drop{idx, seen}] }
			got, err := c.get(testCtx(t, 20*time.Second), "f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("content differs")
			}
			if back := c.goBackPoints(); fmt.Sprint(back) != fmt.Sprint(tt.wantBack) {
				t.Fatalf("retransmission restarted at blocks %v, want %v (trace %v)", back, tt.wantBack, c.trace)
			}
			if st := rec.next(t); st.Err != nil || st.Retransmits == 0 {
				t.Fatalf("stats %+v: want success with retransmits", st)
			}
		})
	}
}

// TestDuplicateAcks checks Sorcerer's Apprentice cannot happen: a client
// that sends every ACK three times, and re-ACKs duplicate DATA, must get
// each block exactly once on a lossless link.
func TestDuplicateAcks(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(11, 100*512+3)
	fsys.put("f", data)
	addr, rec, _ := startServer(t, Config{FS: fsys})
	for _, opts := range [][]string{nil, {"windowsize", "4"}, {"blksize", "1024", "windowsize", "16"}} {
		t.Run(fmt.Sprint(opts), func(t *testing.T) {
			c := newTestClient(addr).withOpts(opts...)
			c.dupAcks = 2
			got, err := c.get(testCtx(t, 20*time.Second), "f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("content differs")
			}
			blocks := int(c.trace[len(c.trace)-1])
			// The final DATA may be repeated by nobody: the client leaves
			// right after ACKing it, so every DATA counted is one send.
			time.Sleep(50 * time.Millisecond)
			if c.nDATA != blocks {
				t.Fatalf("received %d DATA packets for %d blocks: duplicate ACKs caused retransmissions", c.nDATA, blocks)
			}
			if st := rec.next(t); st.Retransmits != 0 {
				t.Fatalf("stats report %d retransmits, want 0", st.Retransmits)
			}
		})
	}
}

// TestOACKRetransmitAndRefusal: a lost OACK is resent; ERROR 8 from the
// client ends the transfer.
func TestOACKRetransmitAndRefusal(t *testing.T) {
	fsys := newMapFS()
	fsys.put("f", randBytes(12, 5000))
	addr, rec, logs := startServer(t, Config{FS: fsys, Timeout: 100 * time.Millisecond})

	c := newTestClient(addr).withOpts("blksize", "1000")
	c.timeout = time.Second // the repeated RRQ, not the server timer, resends the OACK
	c.ignoreOACKs = 2
	if _, err := c.get(testCtx(t, 10*time.Second), "f"); err != nil {
		t.Fatal(err)
	}
	if st := rec.next(t); st.Err != nil || st.Retransmits != 2 {
		t.Fatalf("stats %+v: want success after 2 OACK retransmissions", st)
	}

	c = newTestClient(addr).withOpts("blksize", "1000")
	c.refuseOACK = true
	c.get(testCtx(t, 10*time.Second), "f")
	st := rec.next(t)
	var ce clientError
	if !asClientError(st.Err, &ce) || ce.pkt.Code != ErrCodeOptionRefused {
		t.Fatalf("stats error %v, want the client's ERROR 8", st.Err)
	}
	if !strings.Contains(logs.String(), "aborted by client") {
		t.Fatalf("no log line for the client's refusal:\n%s", logs)
	}
	if st.SizeProbe {
		t.Fatal("a refusal without tsize is not a size probe")
	}

	// UEFI firmware asks for tsize and aborts after the OACK, then downloads.
	c = newTestClient(addr).withOpts("tsize", "0", "blksize", "1000")
	c.refuseOACK = true
	c.get(testCtx(t, 10*time.Second), "f")
	if st := rec.next(t); !st.SizeProbe || st.Bytes != 0 {
		t.Fatalf("stats %+v: want a size probe", st)
	}
}

// TestGiveUp: a client that vanishes after the first window is abandoned
// after Retries timeouts, with a log line.
func TestGiveUp(t *testing.T) {
	fsys := newMapFS()
	fsys.put("f", randBytes(13, 100000))
	restore := setClientWait(50 * time.Millisecond) // before the server's goroutines start
	defer restore()
	addr, rec, logs := startServer(t, Config{FS: fsys, Timeout: 20 * time.Millisecond, MinTimeout: 10 * time.Millisecond, Retries: 3})
	c := newTestClient(addr).withOpts("windowsize", "4")
	c.timeout = 2 * time.Second
	c.drop = func(idx uint64, seen int) bool { return idx > 8 }
	go c.get(testCtx(t, 5*time.Second), "f")
	st := rec.next(t)
	if !isGiveUp(st.Err) || st.Bytes != 8*512 || st.Retransmits < 3*4 || st.Retransmits%4 != 0 {
		t.Fatalf("stats %+v: want give-up after 8 blocks and at least 3 retransmitted windows", st)
	}
	if !strings.Contains(logs.String(), "transfer abandoned") {
		t.Fatalf("no log line for the abandoned transfer:\n%s", logs)
	}
}

// TestPatientWhileClientWaits: a transfer whose retransmissions are lost
// more times in a row than Retries lives on while the client repeats its
// last ACK, and completes once a retransmission gets through; the same
// server gives up on a client that says nothing (TestGiveUp).
func TestPatientWhileClientWaits(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(14, 40*512+7)
	fsys.put("f", data)
	restore := setClientWait(100 * time.Millisecond) // before the server's goroutines start
	defer restore()
	addr, rec, _ := startServer(t, Config{FS: fsys, Timeout: 20 * time.Millisecond, MinTimeout: 10 * time.Millisecond, Retries: 2})
	c := newTestClient(addr).withOpts("windowsize", "4")
	c.timeout = 40 * time.Millisecond // re-ACKs after 40 ms without DATA
	const lost = 6                    // more than Retries+1 timeouts' worth
	c.drop = func(idx uint64, seen int) bool { return idx == 9 && seen < lost }
	got, err := c.get(testCtx(t, 10*time.Second), "f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("download: %v (%d bytes, want %d)", err, len(got), len(data))
	}
	if st := rec.next(t); st.Err != nil || st.Retransmits < lost {
		t.Fatalf("stats %+v: want success after at least %d retransmissions of block 9", st, lost)
	}
}

// TestBlockSizeClamp checks the OACK reports the blksize clamped to the
// interface MTU, to MaxBlockSize, or not at all with AllowFragmentation.
func TestBlockSizeClamp(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(14, 70000)
	fsys.put("f", data)
	mtu1500 := func(s *Server) { s.mtuFor = func(net.IP) int { return 1500 } }
	tests := []struct {
		name string
		cfg  Config
		ask  string
		want string
	}{
		{"MTU 1500 clamps 65464", Config{}, "65464", "1468"},
		{"MTU 1500 keeps 1456", Config{}, "1456", "1456"},
		{"MaxBlockSize below MTU", Config{MaxBlockSize: 1024}, "8192", "1024"},
		{"AllowFragmentation", Config{AllowFragmentation: true}, "8192", "8192"},
		{"above RFC maximum", Config{AllowFragmentation: true}, "100000", "65464"},
		{"minimum", Config{}, "8", "8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.FS = fsys
			addr, rec, _ := startServer(t, tt.cfg, mtu1500)
			c := newTestClient(addr).withOpts("blksize", tt.ask)
			got, err := c.get(testCtx(t, 20*time.Second), "f")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("content differs")
			}
			if len(c.oack) != 1 || c.oack[0].Value != tt.want {
				t.Fatalf("OACK %v, want blksize %s", c.oack, tt.want)
			}
			if st := rec.next(t); strconv.Itoa(st.BlockSize) != tt.want {
				t.Fatalf("stats blksize %d, want %s", st.BlockSize, tt.want)
			}
		})
	}
	// Real lookup: loopback's MTU (65536) allows the RFC maximum.
	addr, _, _ := startServer(t, Config{FS: fsys})
	c := newTestClient(addr).withOpts("blksize", "65464")
	if _, err := c.get(testCtx(t, 20*time.Second), "f"); err != nil {
		t.Fatal(err)
	}
	if c.oack[0].Value != "65464" {
		t.Fatalf("loopback OACK %v, want blksize 65464", c.oack)
	}
}

// TestConcurrent runs 500 transfers at once, each checked by sha256.
func TestConcurrent(t *testing.T) {
	fsys := newMapFS()
	const nFiles, nClients = 25, 500
	sums := map[string][32]byte{}
	for i := 0; i < nFiles; i++ {
		d := randBytes(uint64(100+i), 2000+i*1500)
		name := fmt.Sprintf("f%02d", i)
		fsys.put(name, d)
		sums[name] = sha256.Sum256(d)
	}
	cache := NewCache(fsys, 1<<20)
	// Every client is 127.0.0.1 here, standing for nClients machines.
	addr, rec, _ := startServer(t, Config{FS: cache, OnTransfer: func(TransferStats) {}, MaxPerClient: 1024})
	_ = rec
	var wg sync.WaitGroup
	errs := make(chan error, nClients)
	ctx := testCtx(t, 60*time.Second)
	for i := 0; i < nClients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("f%02d", i%nFiles)
			opts := [][]string{nil, {"blksize", "1428"}, {"windowsize", "8"}, {"blksize", "1024", "windowsize", "4", "tsize", "0"}}[i%4]
			c := newTestClient(addr).withOpts(opts...)
			c.timeout = time.Second
			got, err := c.get(ctx, name)
			if err != nil {
				errs <- fmt.Errorf("client %d (%s %v): %w", i, name, opts, err)
				return
			}
			if sha256.Sum256(got) != sums[name] {
				errs <- fmt.Errorf("client %d (%s): sha256 mismatch", i, name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := cache.Stats(); st.Misses != nFiles {
		t.Errorf("cache read %d files from the backing FS, want %d (once each)", st.Misses, nFiles)
	}
}

// TestLostAck: when the ACK of a full window is lost, the resent window
// draws a repeated ACK from a client that, like atftp, answers only the
// first unexpected block, so the transfer goes on after one retransmission
// timeout instead of waiting for the client's own timer.
func TestLostAck(t *testing.T) {
	fsys := newMapFS()
	data := randBytes(15, 100*512+9)
	fsys.put("f", data)
	addr, rec, _ := startServer(t, Config{FS: fsys, Timeout: 300 * time.Millisecond})
	c := newTestClient(addr).withOpts("windowsize", "16")
	c.timeout = 5 * time.Second // the client's own timer must not be what recovers
	c.atftpDups = true
	c.dropAck = func(n uint64, seen int) bool { return n == 32 && seen == 0 }
	start := time.Now()
	got, err := c.get(testCtx(t, 20*time.Second), "f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v: the lost ACK was recovered by the client's timer, not by the server", d)
	}
	if back := c.goBackPoints(); fmt.Sprint(back) != "[17]" {
		t.Fatalf("retransmissions restarted at %v, want [17] (trace %v)", back, c.trace)
	}
	if st := rec.next(t); st.Err != nil || st.Retransmits != 16 {
		t.Fatalf("stats %+v: want success with one window (16) retransmitted", st)
	}
}
