package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/bootfleet/bootfleet/internal/blockset"
	"github.com/bootfleet/bootfleet/internal/mcast"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
	"github.com/bootfleet/bootfleet/internal/rootproxy"
)

// ProxyConfig is the root proxy's config for a machine with memTotal
// bytes of RAM, from its command line: the read cache sized from RAM
// unless bootfleet.readcache= says otherwise, and the export's unwritten
// blocks taken as the base always for a read-only base (client-ram,
// client-disk), and for a server-side overlay once the server said which
// blocks it holds, asked with hc (nil: a client of its own), whose
// connections must leave from the machine's address: the server gives an
// overlay's blocks only to the machine it serves. The group's Interface
// is left to the caller. With multicast and bootfleet.mcast.order=, it
// fetches the content's read order with hc too and turns read-ahead on.
// bootfleet storm builds its emulated machines' proxies with it too, so a
// storm sizes and fills their caches, and reads ahead, as real machines do.
func ProxyConfig(o Options, up *rootproxy.Upstream, memTotal int64, hc *http.Client, log *slog.Logger) (rootproxy.Config, error) {
	cfg := rootproxy.Config{Upstream: up, Logger: log}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	size := int64(up.Info().Size)
	switch {
	case o.ReadCacheSet && o.ReadCacheBytes == 0 && o.ReadCachePercent == 0:
	case o.ReadCacheBytes > 0:
		cfg.CacheBytes = o.ReadCacheBytes
	default:
		pct := o.ReadCachePercent
		if pct == 0 {
			pct = DefaultReadCachePercent
		}
		if memTotal <= 0 {
			return cfg, fmt.Errorf("read cache of %d%% of RAM: the machine's RAM is unknown; set bootfleet.readcache=SIZE", pct)
		}
		cfg.CacheBytes = memTotal / 100 * int64(pct)
	}
	cfg.CacheBytes = min(cfg.CacheBytes, size)
	switch {
	case o.Cache.Mode != CacheNone || up.Info().Flags&nbd.FlagReadOnly != 0:
		cfg.Base = true
	case o.OverlayBlocks != "":
		set, shift, err := FetchOverlayBlocks(hc, o.OverlayBlocks, o.Root.Export)
		if err != nil {
			log.Warn("root proxy: the server did not say which blocks the overlay holds; reading everything from it", "err", err)
			break
		}
		cfg.Base, cfg.Overlay, cfg.OverlayShift = true, set, shift
		log.Info("root proxy: overlay blocks", "blocks", set.Blocks(), "block_size", 1<<shift)
	}
	if o.HasMulticast && cfg.Base && cfg.CacheBytes > 0 {
		cfg.Multicast = &mcast.ReceiverConfig{Server: o.Multicast.Server, Group: o.Multicast.Group, Content: o.Multicast.Content, Logger: log}
		if o.ReadOrder != "" && o.ReadAhead > 0 {
			// Without an order the proxy reads no further ahead than the
			// kernel asks: a boot still works, one round trip a miss slower.
			order, err := fetchReadOrder(hc, o.ReadOrder)
			if err != nil {
				log.Info("root proxy: no read order; reading no further ahead than the kernel", "err", err)
			} else {
				cfg.Order, cfg.ReadAhead = order, o.ReadAhead
				log.Info("root proxy: read order", "chunks", len(order), "read_ahead", o.ReadAhead)
			}
		}
	}
	return cfg, nil
}

// FetchOverlayBlocks GETs the blocks the machine's server-side overlay
// holds with hc (nil: a client of its own); the export name, the boot's
// secret, is the credential.
func FetchOverlayBlocks(hc *http.Client, url, export string) (*blockset.Set, uint8, error) {
	b, err := get(hc, url, "Bearer "+export, "overlay blocks")
	if err != nil {
		return nil, 0, err
	}
	return blockset.Parse(b)
}

// fetchReadOrder GETs with hc (nil: a client of its own) the order in
// which earlier boots read the content.
func fetchReadOrder(hc *http.Client, url string) ([]uint32, error) {
	b, err := get(hc, url, "", "read order")
	if err != nil {
		return nil, err
	}
	return readorder.Decode(b)
}

// get GETs url with hc (nil: a client of its own) within 10 s, with
// auth as its Authorization unless empty, and returns a 200's body of at
// most 64 MiB; what names the body in errors.
func get(hc *http.Client, url, auth, what string) ([]byte, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s %q: %w", what, url, err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: got %s, want 200 OK", what, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", what, err)
	}
	return b, nil
}
