package storm

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// TestRetryTimer follows iPXE's timer through the expiries of an MTFTP
// open nobody answers and the packets of a stream.
func TestRetryTimer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name string
		run  func(*retryTimer)
		want time.Time // deadline
	}{
		{"no delay: expires at once", func(r *retryTimer) { r.startNow(t0) }, t0},
		{"after the first expiry, 1/4 s", func(r *retryTimer) {
			r.startNow(t0)
			r.expire()
			r.restart(t0)
		}, ms(250)},
		{"each expiry doubles it: 1/4, 1/2, 1 s", func(r *retryTimer) {
			r.startNow(t0)
			r.expire()
			r.restart(t0)
			r.expire()
			r.restart(ms(250))
			r.expire()
			r.restart(ms(750))
		}, ms(1750)},
		{"packets close together keep it at 1/4 s", func(r *retryTimer) {
			r.startNow(t0)
			r.expire()
			r.restart(t0)
			for i := 1; i <= 100; i++ {
				r.restart(ms(i))
			}
		}, ms(350)},
		{"it learns a slow stream's spacing", func(r *retryTimer) {
			r.timeout, r.start, r.running = ipxeMinTimeout, t0, true
			for i := 1; i <= 50; i++ {
				r.restart(ms(400 * i))
			}
		}, ms(400*50 + 1600)},
		{"never past 10 s", func(r *retryTimer) {
			r.startNow(t0)
			for range 10 {
				r.expire()
				r.restart(t0)
			}
		}, t0.Add(ipxeMaxTimeout)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r retryTimer
			tt.run(&r)
			if got := r.deadline(); got.Sub(tt.want).Abs() > 2*time.Millisecond {
				t.Fatalf("deadline %v after t0, want %v", got.Sub(t0), tt.want.Sub(t0))
			}
		})
	}
}

// TestMTFTPBlocks feeds a fetch blocks as the group would hand them.
func TestMTFTPBlocks(t *testing.T) {
	srv := netip.MustParseAddrPort("10.0.0.1:40000")
	other := netip.MustParseAddrPort("10.0.0.1:40001")
	data := func(src netip.AddrPort, block uint16, n int) mtftpPacket {
		return mtftpPacket{src: src, op: tftp.OpDATA, block: block, data: make([]byte, n)}
	}
	tests := []struct {
		name    string
		in      []mtftpPacket
		done    bool
		wantErr error
		bytes   int64
		dropped int
	}{
		{"in order, short last", []mtftpPacket{data(srv, 1, 512), data(srv, 2, 512), data(srv, 3, 7)}, true, nil, 1031, 0},
		{"any order", []mtftpPacket{data(srv, 3, 7), data(srv, 1, 512), data(srv, 2, 512)}, true, nil, 1031, 0},
		{"a gap: not done", []mtftpPacket{data(srv, 1, 512), data(srv, 3, 7)}, false, nil, 519, 0},
		{"duplicates count once", []mtftpPacket{data(srv, 1, 512), data(srv, 1, 512), data(srv, 2, 0)}, true, nil, 512, 0},
		{"a multiple of 512 ends with an empty block", []mtftpPacket{data(srv, 1, 512), data(srv, 2, 512)}, false, nil, 1024, 0},
		{"the first packet's source is the peer", []mtftpPacket{data(srv, 1, 512), data(other, 2, 9), data(srv, 2, 3)}, true, nil, 515, 1},
		{"block 0 fails the fetch", []mtftpPacket{data(srv, 0, 512)}, true, ErrMTFTPData, 0, 0},
		{"an overlong block fails it", []mtftpPacket{data(srv, 1, 513)}, true, ErrMTFTPData, 0, 0},
		{"an ERROR fails it", []mtftpPacket{{src: srv, op: tftp.OpERROR, data: (&tftp.Error{Code: 1, Message: "x"}).Append(nil)}}, true, ErrMTFTPServer, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &mtftpFetch{path: "k", wake: make(chan struct{}, 1)}
			for _, p := range tt.in {
				f.receive(p, false, time.Now())
			}
			if f.done != tt.done || !errors.Is(f.err, tt.wantErr) || (f.err == nil) != (tt.wantErr == nil) {
				t.Fatalf("done %v err %v, want done %v err %v", f.done, f.err, tt.done, tt.wantErr)
			}
			if f.st.MulticastBytes != tt.bytes || f.st.Dropped != tt.dropped {
				t.Fatalf("stats %+v, want %d bytes, %d dropped", f.st, tt.bytes, tt.dropped)
			}
		})
	}
}
