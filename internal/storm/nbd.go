package storm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// nbdReplay connects to the export from local, as the initramfs agent
// does (fixed newstyle, NBD_OPT_GO, simple replies), replays the trace's
// reads with up to depth in flight, as the kernel's readahead keeps
// several, and disconnects with NBD_CMD_DISC. It returns the data bytes
// read, and tells moved of them as each reply arrives.
func nbdReplay(ctx context.Context, local netip.Addr, target rootarg.Target, trace *Trace, depth int, moved func(int64)) (int64, error) {
	ctx, cancel := context.WithCancel(ctx) // also ends the writer when the reader fails
	defer cancel()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)), Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", target.Addr())
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	conn.SetDeadline(time.Now().Add(30 * time.Second))
	info, err := nbd.ClientHandshake(conn, target.Export)
	if err != nil {
		return 0, err
	}
	conn.SetDeadline(time.Time{})
	if info.Size == 0 {
		return 0, fmt.Errorf("export %s is empty", target)
	}

	reads := make([]Read, 0, len(trace.Reads))
	for _, r := range trace.Reads {
		if r, ok := r.Fit(info.Size); ok {
			reads = append(reads, r)
		}
	}
	if len(reads) == 0 {
		return 0, fmt.Errorf("export of %d bytes is smaller than every read of the trace", info.Size)
	}

	// The writer sends request i once reply i-depth has arrived; handles
	// are indexes into reads, so the reader knows each reply's length.
	slots := make(chan struct{}, depth)
	werr := make(chan error, 1)
	go func() {
		bw := bufio.NewWriter(conn)
		var hdr []byte
		for i, r := range reads {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				werr <- ctx.Err()
				return
			}
			hdr = nbd.AppendRequest(hdr[:0], nbd.Request{Type: nbd.CmdRead, Handle: uint64(i), Offset: r.Offset, Length: r.Length})
			bw.Write(hdr)
			if len(slots) == cap(slots) || i == len(reads)-1 {
				if err := bw.Flush(); err != nil {
					werr <- err
					return
				}
			}
		}
		werr <- nil
	}()

	br := bufio.NewReaderSize(conn, 256<<10)
	var got int64
	var rh [nbd.SimpleReplyLen]byte
	for range reads {
		conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := io.ReadFull(br, rh[:]); err != nil {
			return got, fmt.Errorf("read reply after %d bytes: %w", got, err)
		}
		handle, errno, err := nbd.ParseSimpleReply(rh[:])
		if err != nil {
			return got, err
		}
		if handle >= uint64(len(reads)) {
			return got, fmt.Errorf("reply for handle %d, which was never sent", handle)
		}
		r := reads[handle]
		if errno != 0 {
			return got, fmt.Errorf("server answered READ %d+%d with error %v", r.Offset, r.Length, errno)
		}
		n, err := io.CopyN(io.Discard, br, int64(r.Length))
		got += n
		moved(n)
		if err != nil {
			return got, fmt.Errorf("READ %d+%d: after %d of its bytes: %w", r.Offset, r.Length, n, err)
		}
		<-slots
	}
	if err := <-werr; err != nil {
		return got, err
	}
	disc := nbd.AppendRequest(nil, nbd.Request{Type: nbd.CmdDisc, Handle: uint64(len(reads))})
	if _, err := conn.Write(disc); err != nil && !errors.Is(err, net.ErrClosed) {
		return got, fmt.Errorf("send NBD_CMD_DISC: %w", err)
	}
	return got, nil
}
