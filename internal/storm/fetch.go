package storm

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// fetcher is one machine's HTTP client, its connections leaving from the
// machine's leased address.
type fetcher struct {
	client *http.Client
}

func newFetcher(local netip.Addr) *fetcher {
	d := &net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, 0)), Timeout: 10 * time.Second}
	return &fetcher{client: &http.Client{
		Transport: &http.Transport{
			DialContext:           d.DialContext,
			DisableCompression:    true, // iPXE asks for none
			MaxIdleConnsPerHost:   1,
			ResponseHeaderTimeout: 30 * time.Second,
			Proxy:                 nil, // a lab's boot network has no proxy; never take one from the environment
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 { // iPXE follows a handful of redirects
				return fmt.Errorf("more than %d redirects", len(via))
			}
			return nil
		},
	}}
}

// get fetches url, keeps at most keep bytes of the body and counts the rest.
func (f *fetcher) get(ctx context.Context, url string, keep int64) ([]byte, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("User-Agent", "iPXE/1.21.1 (bootfleet storm)")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: got %s, want 200 OK", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, keep))
	n := int64(len(body))
	if err == nil {
		var m int64
		m, err = io.Copy(io.Discard, resp.Body)
		n += m
	}
	if err != nil {
		return nil, n, fmt.Errorf("GET %s: after %d bytes: %w", url, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return nil, n, fmt.Errorf("GET %s: got %d bytes, Content-Length %d", url, n, resp.ContentLength)
	}
	return body, n, nil
}

func (f *fetcher) close() { f.client.CloseIdleConnections() }
