package storm

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// recordFlow is one client connection being followed.
type recordFlow struct {
	stream  *tcpStream
	scanner *requestScanner
}

// Record captures the requests NBD clients send to the server on
// cfg.Interface, without standing in the connection, and returns their
// reads in the order they were sent (across sessions, as a machine that
// reconnects sends them). It ends when ctx is done or after cfg.Idle.
func Record(ctx context.Context, cfg RecordConfig) (*Trace, RecordStats, error) {
	if cfg.Port == 0 {
		cfg.Port = 10809
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	var st RecordStats
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, st, fmt.Errorf("port %d: want 1..65535", cfg.Port)
	}
	fd, _, err := openPacketSocket(cfg.Interface, dstPortFilter(protoTCP, uint16(cfg.Port)), 64<<20)
	if err != nil {
		return nil, st, fmt.Errorf("record: %w", err)
	}
	defer unix.Close(fd)

	tr := &Trace{}
	flows := map[[2]netip.AddrPort]*recordFlow{}
	ignored := map[[2]netip.AddrPort]bool{}
	var last time.Time
	buf := make([]byte, 256<<10)
	for ctx.Err() == nil {
		if cfg.Idle > 0 && !last.IsZero() && time.Since(last) > cfg.Idle {
			break
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // the 200 ms timeout, or EINTR
		}
		seg, err := ParseTCP4(buf[:n])
		if err != nil || (cfg.Client.IsValid() && seg.Src.Addr() != cfg.Client) {
			continue
		}
		key := [2]netip.AddrPort{seg.Src, seg.Dst}
		f := flows[key]
		switch {
		case seg.SYN:
			f = &recordFlow{scanner: &requestScanner{}}
			f.scanner.onRead = func(r Read) {
				tr.Reads = append(tr.Reads, r)
				last = time.Now()
			}
			f.stream = newTCPStream(seg.Seq, func(p []byte) error { _, err := f.scanner.Write(p); return err })
			flows[key] = f
			st.Sessions++
			cfg.Log.Info("nbd session", "client", seg.Src.String())
			continue
		case f == nil:
			if !ignored[key] && len(seg.Payload) > 0 {
				ignored[key] = true
				st.Ignored++
				cfg.Log.Warn("nbd session open before the recording began: not recorded; reboot the machine", "client", seg.Src.String())
			}
			continue
		}
		if err := f.stream.add(seg.Seq, seg.Payload); err != nil {
			st.Broken++
			cfg.Log.Warn("nbd session not followed to its end", "client", seg.Src.String(), "err", err)
			delete(flows, key)
			continue
		}
		if seg.FIN || seg.RST {
			st.Writes += f.scanner.writes
			delete(flows, key)
		}
	}
	for _, f := range flows {
		st.Writes += f.scanner.writes
	}
	return tr, st, nil
}
