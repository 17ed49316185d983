package tftp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var loopback = netip.MustParseAddr("127.0.0.1")

func addrPort(a net.Addr) netip.AddrPort { return a.(*net.UDPAddr).AddrPort() }

// TestGet fetches files of awkward sizes from the server with each
// firmware's options: the content must be the file's, with one RRQ per
// request and no retransmission on a clean loopback.
func TestGet(t *testing.T) {
	fsys := newMapFS()
	files := map[string][]byte{"empty": nil, "one": {1}, "blocks": randBytes(1, 1468*8), "nbp": randBytes(2, 1<<20+1)}
	for name, b := range files {
		fsys.put(name, b)
	}
	addr, _, _ := startServer(t, Config{FS: fsys})
	opts := map[string]ClientOptions{
		"uefi":     {BlockSize: 1468, WindowSize: 4, SizeProbe: true, Timeout: time.Second},
		"bios":     {BlockSize: 1432, Timeout: time.Second},
		"no-opts":  {Timeout: time.Second, Tries: 3},
		"window16": {BlockSize: 8192, WindowSize: 16, Timeout: time.Second, Tries: 3, ReadBuffer: 1 << 20},
	}
	for oname, o := range opts {
		for name, content := range files {
			t.Run(oname+"/"+name, func(t *testing.T) {
				var got bytes.Buffer
				st, err := Get(testCtx(t, 20*time.Second), loopback, addrPort(addr), name, &got, o)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Bytes(), content) || st.Bytes != int64(len(content)) {
					t.Fatalf("got %d bytes (stats say %d), want the file's %d", got.Len(), st.Bytes, len(content))
				}
				wantTries := 1
				if o.SizeProbe {
					wantTries = 2
				}
				if st.Tries != wantTries || st.Retransmits != 0 {
					t.Fatalf("tries %d, retransmits %d on a clean loopback; want %d and 0", st.Tries, st.Retransmits, wantTries)
				}
			})
		}
	}
}

func TestGetMissingFile(t *testing.T) {
	addr, _, _ := startServer(t, Config{FS: newMapFS()})
	_, err := Get(testCtx(t, 10*time.Second), loopback, addrPort(addr), "bootx64.efi", &bytes.Buffer{}, ClientOptions{BlockSize: 1432})
	if err == nil || !strings.Contains(err.Error(), "server sent ERROR 1") || !strings.Contains(err.Error(), "bootx64.efi after 1 try") {
		t.Fatalf("err = %v, want the server's ERROR 1 for bootx64.efi after 1 try", err)
	}
}

// TestGetRetriesRRQ: the first two RRQs are lost; the third reaches the
// server, and the tries say so.
func TestGetRetriesRRQ(t *testing.T) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fsys := newMapFS()
	content := randBytes(3, 50000)
	fsys.put("nbp", content)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1500)
		for range 2 { // lost on the way: read before the server runs
			if _, _, err := conn.ReadFrom(buf); err != nil {
				done <- err
				return
			}
		}
		done <- NewServer(Config{FS: fsys}).Serve(ctx, conn)
	}()
	defer func() {
		cancel()
		conn.Close()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	var got bytes.Buffer
	o := ClientOptions{BlockSize: 1432, Timeout: 100 * time.Millisecond}
	st, err := Get(testCtx(t, 10*time.Second), loopback, addrPort(conn.LocalAddr()), "nbp", &got, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), content) || st.Tries != 3 {
		t.Fatalf("%d bytes after %d RRQs; want %d bytes after 3 RRQs (the first two lost)", got.Len(), st.Tries, len(content))
	}
}

// TestGetGivesUp: nobody answers; the error says how many tries.
func TestGetGivesUp(t *testing.T) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() // bound, silent
	o := ClientOptions{BlockSize: 1432, Timeout: 100 * time.Millisecond, Tries: 3}
	_, err = Get(testCtx(t, 10*time.Second), loopback, addrPort(conn.LocalAddr()), "undionly.kpxe", &bytes.Buffer{}, o)
	if err == nil || !strings.Contains(err.Error(), "no answer to RRQ for undionly.kpxe") || !strings.Contains(err.Error(), "after 3 tries") {
		t.Fatalf("err = %v, want no answer after 3 tries", err)
	}
}

// TestGetBlockWrap: past block 65535 the block number wraps to 0, as the
// server's sender and most servers do.
func TestGetBlockWrap(t *testing.T) {
	content := randBytes(4, 70000*8+3)
	addr := serveFile(t, "big", content)
	var got bytes.Buffer
	o := ClientOptions{BlockSize: 8, WindowSize: 64, Timeout: time.Second, Tries: 3}
	if _, err := Get(testCtx(t, 60*time.Second), loopback, addrPort(addr), "big", &got, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), content) {
		t.Fatalf("got %d bytes, want the file's %d over 70001 blocks", got.Len(), len(content))
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestGetWriteError: a writer that fails ends the transfer with its error.
func TestGetWriteError(t *testing.T) {
	addr := serveFile(t, "f", randBytes(5, 4096))
	full := errors.New("disk full")
	_, err := Get(testCtx(t, 10*time.Second), loopback, addrPort(addr), "f", failingWriter{full}, ClientOptions{})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), "block 1 of f") {
		t.Fatalf("err = %v, want the writer's error at block 1 of f", err)
	}
}

// fetch downloads name from the server at addr with o and returns it.
func fetch(ctx context.Context, addr net.Addr, name string, o ClientOptions) ([]byte, error) {
	var b bytes.Buffer
	_, err := Get(ctx, loopback, addrPort(addr), name, &b, o)
	return b.Bytes(), err
}

// serveFile serves one file on loopback until the test ends.
func serveFile(t *testing.T, name string, data []byte) net.Addr {
	t.Helper()
	fsys := newMapFS()
	fsys.put(name, data)
	addr, _, _ := startServer(t, Config{FS: fsys})
	return addr
}
