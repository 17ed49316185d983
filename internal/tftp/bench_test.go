package tftp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
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
	benchBlk    = 1456 // what firmware asks for on a 1500-MTU link
	benchWindow = 64
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
		n, err := benchGet(testCtx(b, 60*time.Second), addr, "img")
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
				if n, err := benchGet(ctx, addr, "img"); err != nil || n != len(data) {
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
	benchAtftp(b, 64<<20, "--option", "windowsize "+strconv.Itoa(benchWindow))
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
	args := append(append([]string{"--option", "blksize " + strconv.Itoa(benchBlk)}, opts...), "-g", "-r", "img", "-l", os.DevNull, "127.0.0.1", port)
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

// benchGet downloads name with the client as a benchmark sees it: a
// window of benchWindow blocks of benchBlk bytes and a socket buffer that
// holds a few windows. It returns the bytes received.
func benchGet(ctx context.Context, server net.Addr, name string) (int, error) {
	o := ClientOptions{BlockSize: benchBlk, WindowSize: benchWindow, ReadBuffer: 4 << 20, Timeout: time.Second}
	st, err := Get(ctx, loopback, addrPort(server), name, io.Discard, o)
	return int(st.Bytes), err
}
