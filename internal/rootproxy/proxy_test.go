package rootproxy

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/nbd"
)

func newProxy(t *testing.T, cfg Config, addrs ...string) *Proxy {
	t.Helper()
	up, err := NewUpstream(context.Background(), UpstreamConfig{Dial: dialer(addrs...), Timeout: time.Second, GiveUp: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	cfg.Upstream = up
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProxyCachesTheBaseAndNeverItsWrites: a second read of the base is
// answered from the cache, with no byte more from the server; a write
// goes to the server and every later read of it comes from there.
func TestProxyCachesTheBaseAndNeverItsWrites(t *testing.T) {
	const size = 64 * chunkwire.ChunkSize
	e := newMemExport(size, 1)
	base := e.snapshot()
	srv := serveUpstream(t, e)
	p := newProxy(t, Config{CacheBytes: size, Base: true}, srv.addr)
	k := attachKernel(t, p)
	if k.info.Size != size {
		t.Fatalf("kernel sees %d bytes, want %d", k.info.Size, size)
	}
	// Without a group the proxy reads what the kernel asks, as the
	// direct path does, and caches the chunks that holds whole.
	const off, n = 3 * chunkwire.ChunkSize, 128 << 10
	got, err := k.do(nbd.CmdRead, off, nil, n)
	if err != nil || !bytes.Equal(got, base[off:off+n]) {
		t.Fatalf("first read: %v, equal %v", err, bytes.Equal(got, base[off:off+n]))
	}
	read := e.read.Load()
	if read != n {
		t.Fatalf("server sent %d bytes for the first read, want the %d asked for", read, n)
	}
	if got, err = k.do(nbd.CmdRead, off, nil, n); err != nil || !bytes.Equal(got, base[off:off+n]) {
		t.Fatalf("second read: %v", err)
	}
	if e.read.Load() != read {
		t.Fatalf("second read reached the server: %d bytes more", e.read.Load()-read)
	}
	w := bytes.Repeat([]byte{0xee}, 4096)
	if _, err := k.do(nbd.CmdWrite, off+4096, w, len(w)); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), base[off:off+n]...)
	copy(want[4096:], w)
	if got, err = k.do(nbd.CmdRead, off, nil, n); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after a write: %v, sees the write: %v", err, bytes.Equal(got[4096:8192], w))
	}
	if !bytes.Equal(e.snapshot()[off+4096:off+8192], w) {
		t.Fatal("the write did not reach the server")
	}
	st := p.Stats()
	if st.HitBytes != n || st.WrittenBytes != n || st.Multicast != "off" {
		t.Fatalf("stats %+v: want %d hit bytes, %d of written blocks, multicast off", st, n, n)
	}
}

// TestProxyOverlayBlocksComeFromTheServer: blocks the server's overlay
// held at connect never fill the cache, so a chunk that holds one is
// read from the server every time.
func TestProxyOverlayBlocksComeFromTheServer(t *testing.T) {
	const size = 16 * chunkwire.ChunkSize
	e := newMemExport(size, 2)
	srv := serveUpstream(t, e)
	var overlay blockset.Set
	overlay.Add(2*chunkwire.ChunkSize/4096 + 1) // a block inside chunk 2
	p := newProxy(t, Config{CacheBytes: size, Base: true, Overlay: &overlay, OverlayShift: 12}, srv.addr)
	k := attachKernel(t, p)
	for range 2 {
		if _, err := k.do(nbd.CmdRead, 0, nil, 4*chunkwire.ChunkSize); err != nil {
			t.Fatal(err)
		}
	}
	if p.cache.Has(2) {
		t.Fatal("chunk 2, which holds an overlay block, is cached")
	}
	if !p.cache.Has(1) || !p.cache.Has(3) {
		t.Fatal("clean chunks 1 and 3 are not cached")
	}
	// Change the overlay's block on the server: the proxy must see it.
	e.WriteAt(bytes.Repeat([]byte{1}, 4096), 2*chunkwire.ChunkSize+4096)
	got, err := k.do(nbd.CmdRead, 2*chunkwire.ChunkSize, nil, chunkwire.ChunkSize)
	if err != nil || !bytes.Equal(got[4096:8192], bytes.Repeat([]byte{1}, 4096)) {
		t.Fatalf("overlay block read from the cache, not the server: %v", err)
	}
}

// TestProxyWithoutCacheIsADirectPath: with no cache every byte read
// comes from the server, as it asked, and a read-only export stays so.
func TestProxyWithoutCacheIsADirectPath(t *testing.T) {
	const size = 8 * chunkwire.ChunkSize
	e := newMemExport(size, 3)
	e.readOnly = true
	srv := serveUpstream(t, e)
	p := newProxy(t, Config{}, srv.addr)
	k := attachKernel(t, p)
	if k.info.Flags&nbd.FlagReadOnly == 0 {
		t.Fatal("read-only export offered writable")
	}
	for range 2 {
		if _, err := k.do(nbd.CmdRead, 100*512, nil, 8192); err != nil {
			t.Fatal(err)
		}
	}
	if e.read.Load() != 2*8192 {
		t.Fatalf("server sent %d bytes, want %d", e.read.Load(), 2*8192)
	}
	if _, err := k.do(nbd.CmdWrite, 0, make([]byte, 512), 512); err == nil {
		t.Fatal("a write to a read-only export succeeded")
	}
}
