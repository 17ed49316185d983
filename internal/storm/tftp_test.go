package storm

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/tftp"
)

// memFS serves fixed files to the real bootfleet TFTP server.
type memFS map[string][]byte

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m memFS) Open(name string) (tftp.File, error) {
	b, ok := m[strings.TrimPrefix(name, "/")]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return memFile{bytes.NewReader(b)}, nil
}

// startTFTP serves files on conn with bootfleet's TFTP server until the
// test ends.
func startTFTP(t *testing.T, conn net.PacketConn, files memFS) {
	t.Helper()
	srv := tftp.NewServer(tftp.Config{FS: files})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("TFTP server did not stop within 5 s")
		}
	})
}

func listenLoopback(t *testing.T) (net.PacketConn, netip.AddrPort) {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return conn, conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// TestTFTPGet fetches files of awkward sizes from the real server with
// each firmware's options: the byte count must be the file's.
func TestTFTPGet(t *testing.T) {
	files := memFS{"empty": nil, "one": {1}, "blocks": pattern(1468 * 8), "nbp": pattern(1<<20 + 1)}
	conn, addr := listenLoopback(t)
	startTFTP(t, conn, files)
	local := netip.MustParseAddr("127.0.0.1")
	fast := func(o TFTPOptions) TFTPOptions { o.Timeout = time.Second; return o }
	opts := map[string]TFTPOptions{
		"uefi":     fast(DefaultTFTP(FirmwareUEFI)),
		"bios":     fast(DefaultTFTP(FirmwareBIOS)),
		"no-opts":  {Timeout: time.Second, Tries: 3},
		"window16": {BlockSize: 8192, WindowSize: 16, Timeout: time.Second, Tries: 3},
	}
	for oname, o := range opts {
		for name, content := range files {
			t.Run(oname+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				st, err := tftpGet(ctx, local, addr, name, o)
				if err != nil {
					t.Fatal(err)
				}
				want := int64(len(content)) // the size probe moves no file bytes
				if st.bytes != want {
					t.Fatalf("got %d bytes, want %d", st.bytes, want)
				}
				wantTries := 1
				if o.SizeProbe {
					wantTries = 2
				}
				if st.tries != wantTries || st.retransmits != 0 {
					t.Fatalf("tries %d, retransmits %d on a clean loopback; want %d and 0", st.tries, st.retransmits, wantTries)
				}
			})
		}
	}
}

func TestTFTPGetMissingFile(t *testing.T) {
	conn, addr := listenLoopback(t)
	startTFTP(t, conn, memFS{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := tftpGet(ctx, netip.MustParseAddr("127.0.0.1"), addr, "bootx64.efi", DefaultTFTP(FirmwareBIOS))
	if err == nil || !strings.Contains(err.Error(), "server sent ERROR 1") || !strings.Contains(err.Error(), "bootx64.efi after 1 try") {
		t.Fatalf("err = %v, want the server's ERROR 1 for bootx64.efi after 1 try", err)
	}
}

// TestTFTPGetRetriesRRQ: a server that starts late is reached by the
// RRQ's retransmissions, and the tries say how many it took.
func TestTFTPGetRetriesRRQ(t *testing.T) {
	conn, addr := listenLoopback(t)
	content := pattern(50000)
	late := time.AfterFunc(700*time.Millisecond, func() { startTFTP(t, conn, memFS{"nbp": content}) })
	defer late.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o := DefaultTFTP(FirmwareBIOS)
	o.Timeout = 300 * time.Millisecond
	st, err := tftpGet(ctx, netip.MustParseAddr("127.0.0.1"), addr, "nbp", o)
	if err != nil {
		t.Fatal(err)
	}
	if st.bytes != int64(len(content)) || st.tries < 3 || st.tries > 4 {
		t.Fatalf("bytes %d tries %d; want %d bytes after 3 or 4 RRQs (300 ms apart, server up at 700 ms)", st.bytes, st.tries, len(content))
	}
}

// TestTFTPGetGivesUp: nobody answers; the error says how many tries.
func TestTFTPGetGivesUp(t *testing.T) {
	conn, addr := listenLoopback(t)
	defer conn.Close() // bound, silent
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := TFTPOptions{BlockSize: 1432, Timeout: 100 * time.Millisecond, Tries: 3}
	_, err := tftpGet(ctx, netip.MustParseAddr("127.0.0.1"), addr, "undionly.kpxe", o)
	if err == nil || !strings.Contains(err.Error(), "no answer to RRQ for undionly.kpxe") || !strings.Contains(err.Error(), "after 3 tries") {
		t.Fatalf("err = %v, want no answer after 3 tries", err)
	}
}

// TestTFTPGetBlockWrap: past block 65535 the block number wraps to 0, as
// bootfleet's sender and most servers do.
func TestTFTPGetBlockWrap(t *testing.T) {
	content := pattern(70000*8 + 3)
	conn, addr := listenLoopback(t)
	startTFTP(t, conn, memFS{"big": content})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := tftpGet(ctx, netip.MustParseAddr("127.0.0.1"), addr, "big", TFTPOptions{BlockSize: 8, WindowSize: 64, Timeout: time.Second, Tries: 3})
	if err != nil {
		t.Fatal(err)
	}
	if st.bytes != int64(len(content)) {
		t.Fatalf("got %d bytes, want %d over 70001 blocks", st.bytes, len(content))
	}
}
