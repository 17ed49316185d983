package tftp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Loopback throughput benchmarks. They report MB/s (from b.SetBytes) and
// CPU seconds per GB served, from getrusage, so no perf is needed:
//
//	go test -run '^$' -bench Transfer -benchtime 5x ./internal/tftp/
//
// cpu-s/GB counts this whole process. In BenchmarkTransfer and
// BenchmarkTransferConcurrent the Go client runs in-process, so it is
// server plus client; BenchmarkTransferAtftp runs atftp as child processes,
// so cpu-s/GB is the server alone and client-cpu-s/GB the clients.

const (
	benchBlk    = "1456" // what firmware asks for on a 1500-MTU link
	benchWindow = "64"
)

// benchServer serves one cached file of size bytes on loopback.
// BF_BENCH_NOGSO=1 benchmarks with Config.DisableGSO.
func benchServer(b *testing.B, size int) (net.Addr, []byte) {
	b.Helper()
	fsys := newMapFS()
	data := randBytes(99, size)
	fsys.put("img", data)
	addr, _, _ := startServer(b, Config{FS: NewCache(fsys, 1<<30), Logger: slog.New(slog.DiscardHandler),
		OnTransfer: func(TransferStats) {}, DisableGSO: os.Getenv("BF_BENCH_NOGSO") != "", MaxPerClient: 1024})
	return addr, data
}

type cpuMeter struct {
	self, children time.Duration
}

func cpuNow() cpuMeter {
	var ru, rc syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc)
	tv := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return cpuMeter{tv(&ru), tv(&rc)}
}

func (m cpuMeter) report(b *testing.B, bytes int64) {
	now := cpuNow()
	gb := float64(bytes) * float64(b.N) / 1e9
	b.ReportMetric((now.self-m.self).Seconds()/gb, "cpu-s/GB")
	if now.children > m.children {
		b.ReportMetric((now.children-m.children).Seconds()/gb, "client-cpu-s/GB")
	}
}

func BenchmarkTransfer(b *testing.B) {
	const size = 64 << 20
	addr, data := benchServer(b, size)
	b.SetBytes(size)
	cpu := cpuNow()
	b.ResetTimer()
	for range b.N {
		n, err := leanGet(testCtx(b, 60*time.Second), addr, "img", benchBlk, benchWindow)
		if err != nil || n != len(data) {
			b.Fatalf("got %d bytes, %v; want %d", n, err, len(data))
		}
	}
	b.StopTimer()
	cpu.report(b, size)
}

func BenchmarkTransferConcurrent(b *testing.B) {
	const size, clients = 4 << 20, 200
	addr, data := benchServer(b, size)
	b.SetBytes(size * clients)
	cpu := cpuNow()
	b.ResetTimer()
	for range b.N {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		ctx := testCtx(b, 120*time.Second)
		for range clients {
			wg.Go(func() {
				if n, err := leanGet(ctx, addr, "img", benchBlk, benchWindow); err != nil || n != len(data) {
					errs <- fmt.Errorf("got %d bytes, %v; want %d", n, err, len(data))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu.report(b, size*clients)
}

func BenchmarkTransferAtftp(b *testing.B) {
	benchAtftp(b, 64<<20, "--option", "windowsize "+benchWindow)
}

// BenchmarkLockstepAtftp is one atftp client asking no windowsize, as BIOS
// PXE ROMs do: one round trip per block, so us/block is the server's
// turnaround plus atftp's and the loopback's.
func BenchmarkLockstepAtftp(b *testing.B) {
	const size = 32 << 20
	benchAtftp(b, size)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(size/1456+1)/float64(b.N), "us/block")
}

// benchAtftp fetches a file of size bytes with atftp at blksize 1456 and
// the options in opts.
func benchAtftp(b *testing.B, size int, opts ...string) {
	tool, err := exec.LookPath("atftp")
	if err != nil {
		b.Skip("atftp not installed")
	}
	addr, _ := benchServer(b, size)
	port := strconv.Itoa(addr.(*net.UDPAddr).Port)
	args := append(append([]string{"--option", "blksize " + benchBlk}, opts...), "-g", "-r", "img", "-l", os.DevNull, "127.0.0.1", port)
	b.SetBytes(int64(size))
	cpu := cpuNow()
	b.ResetTimer()
	for range b.N {
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			b.Fatalf("atftp: %v\n%s", err, out)
		}
	}
	b.StopTimer()
	cpu.report(b, int64(size))
}

// leanGet is a minimal RFC 7440 receiver for benchmarks: no tracing, no
// copies of the payload, one ACK per window. It returns the bytes received.
func leanGet(ctx context.Context, server net.Addr, name, blksize, window string) (int, error) {
	return leanGetProgress(ctx, server, name, blksize, window, nil)
}

// leanGetProgress is leanGet that also adds each in-order payload to
// progress, if not nil.
func leanGetProgress(ctx context.Context, server net.Addr, name, blksize, window string, progress *atomic.Int64) (int, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetReadBuffer(4 << 20)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	srv := server.(*net.UDPAddr).AddrPort()
	rrq := (&Request{Op: OpRRQ, Filename: name, Mode: "octet",
		Options: []Option{{"blksize", blksize}, {"windowsize", window}}}).Append(nil)
	if _, err := conn.WriteToUDPAddrPort(rrq, srv); err != nil {
		return 0, err
	}
	blk, _ := strconv.Atoi(blksize)
	win, _ := strconv.Atoi(window)
	var (
		peer     netip.AddrPort
		buf      = make([]byte, 65536)
		ack      = []byte{0, byte(OpACK), 0, 0}
		received uint64
		lastAck  uint64
		total    int
		idle     int
	)
	sendAck := func(n uint64) {
		ack[2], ack[3] = byte(n>>8), byte(n)
		conn.WriteToUDPAddrPort(ack, peer)
		lastAck = n
	}
	for {
		conn.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && idle < 5 && peer.IsValid() {
				idle++
				sendAck(received)
				continue
			}
			return total, fmt.Errorf("lean client after %d blocks: %w", received, err)
		}
		idle = 0
		if !peer.IsValid() {
			peer = from
		}
		if n < 4 {
			continue
		}
		switch Opcode(buf[1]) {
		case OpOACK:
			if received == 0 {
				sendAck(0)
			}
		case OpERROR:
			return total, fmt.Errorf("server error: %q", buf[4:n])
		case OpDATA:
			bn := uint16(buf[2])<<8 | uint16(buf[3])
			if bn != uint16(received+1) {
				if lastAck != received {
					sendAck(received)
				}
				continue
			}
			received++
			total += n - 4
			if progress != nil {
				progress.Add(int64(n - 4))
			}
			if n-4 < blk {
				sendAck(received)
				return total, nil
			}
			if received-lastAck >= uint64(win) {
				sendAck(received)
			}
		}
	}
}
