package membership

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Holdings is this server's picture of which server holds which image
// content (the store's image copies), read every Interval by Run, so a
// script render asks memory, not the store, where an image can come from.
type Holdings struct {
	store    inventory.ImageCopies
	interval time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	by     map[string][]string // sha256 -> server names, as last read
	read   bool                // a read succeeded at least once
	failed bool
}

// NewHoldings returns Holdings that knows nothing until its first read.
// interval <= 0 means 5 s; log nil discards.
func NewHoldings(store inventory.ImageCopies, interval time.Duration, log *slog.Logger) *Holdings {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Holdings{store: store, interval: interval, log: log}
}

// Run refreshes the picture every interval until ctx is done; a failed
// read keeps the last one. It returns nil.
func (h *Holdings) Run(ctx context.Context) error {
	every(ctx, h.interval, h.Refresh)
	return nil
}

// Refresh reads the image copies once.
func (h *Holdings) Refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, h.interval)
	defer cancel()
	copies, err := h.store.ListImageCopies(rctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if !h.failed && ctx.Err() == nil {
			h.log.Warn("fleet: reading which servers hold which image failed; keeping the last picture", "err", err)
		}
		h.failed = true
		return
	}
	h.failed = false
	by := make(map[string][]string)
	for _, c := range copies {
		by[c.SHA256] = append(by[c.SHA256], c.Server)
	}
	h.by, h.read = by, true
}

// Holders returns the servers recorded as holding content sha. known is
// false when nothing was read yet or no server records sha (an image
// imported a moment ago): the caller then takes every server to hold it.
func (h *Holdings) Holders(sha string) (names []string, known bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names = h.by[sha]
	return names, h.read && len(names) > 0
}
