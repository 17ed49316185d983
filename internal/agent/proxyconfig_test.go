package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
	"github.com/bootfleet/bootfleet/internal/rootarg"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// roExport is a read-only export of 1 MiB whose reads nobody makes.
type roExport struct{ nbd.Export }

func (roExport) Info() nbd.ExportInfo { return nbd.ExportInfo{Size: 1 << 20, ReadOnly: true} }
func (roExport) Close() error         { return nil }

type oneExport struct{}

func (oneExport) Lookup(string, net.Addr) (nbd.Export, error) { return roExport{}, nil }

// readOnlyUpstream is an Upstream connected to a read-only export.
func readOnlyUpstream(t *testing.T) *rootproxy.Upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		nbd.NewServer(oneExport{}, nbd.Config{ShutdownGrace: time.Millisecond}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })
	up, err := rootproxy.NewUpstream(ctx, rootproxy.UpstreamConfig{Dial: func(ctx context.Context, _ int) (net.Conn, nbd.Negotiated, string, error) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			return nil, nbd.Negotiated{}, "", err
		}
		info, err := nbd.ClientHandshake(c, "root")
		return c, info, ln.Addr().String(), err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	return up
}

// TestProxyConfigReadOrder: with multicast and an order URL, ProxyConfig
// fetches the order with the client it is given (the storm's machine,
// from its own address) and turns read-ahead on; without either, or when
// the server has no order yet, the proxy reads no further ahead than the
// kernel and the boot goes on.
func TestProxyConfigReadOrder(t *testing.T) {
	order := []uint32{3, 4, 5, 0, 9}
	var known atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !known.Load() {
			http.Error(w, "no boot of this content seen yet", http.StatusNotFound)
			return
		}
		w.Write(readorder.Encode(order))
	}))
	defer srv.Close()
	up := readOnlyUpstream(t)
	mc := rootarg.Multicast{Group: netip.MustParseAddrPort("239.1.2.3:4000"), Server: netip.MustParseAddrPort("127.0.0.1:4001")}
	for _, tc := range []struct {
		name      string
		multicast bool
		url       string
		ahead     int
		known     bool
		wantOrder []uint32
		wantGets  int64
	}{
		{"order fetched, read-ahead on", true, srv.URL + "/o", 16, true, order, 1},
		{"no order learned yet", true, srv.URL + "/o", 16, false, nil, 1},
		{"read-ahead 0 fetches nothing", true, srv.URL + "/o", 0, true, nil, 0},
		{"no order URL", true, "", 16, true, nil, 0},
		{"no multicast, no read-ahead", false, srv.URL + "/o", 16, true, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known.Store(tc.known)
			var gets atomic.Int64
			hc := &http.Client{Transport: countingTransport{&gets}}
			o := Options{Multicast: mc, HasMulticast: tc.multicast, ReadOrder: tc.url, ReadAhead: tc.ahead,
				ReadCacheBytes: 1 << 20, ReadCacheSet: true}
			cfg, err := ProxyConfig(o, up, 0, hc, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Order, tc.wantOrder) {
				t.Errorf("order %v, want %v", cfg.Order, tc.wantOrder)
			}
			wantAhead := 0
			if tc.wantOrder != nil {
				wantAhead = tc.ahead
			}
			if cfg.ReadAhead != wantAhead {
				t.Errorf("read-ahead %d, want %d", cfg.ReadAhead, wantAhead)
			}
			if got := gets.Load(); got != tc.wantGets {
				t.Errorf("%d GETs through the machine's client, want %d", got, tc.wantGets)
			}
		})
	}
}

type countingTransport struct{ n *atomic.Int64 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}
