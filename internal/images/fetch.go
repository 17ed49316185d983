package images

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/membership"
)

// storeTimeout bounds each store read or write a fetch makes.
const storeTimeout = 10 * time.Second

// retry is when a failed background fetch is tried again.
type retry struct {
	next time.Time
	wait time.Duration // since the previous failure; doubles
}

// flight is one fetch of one content; every caller wanting it waits on
// done.
type flight struct {
	done chan struct{}
	err  error
}

// Ensure returns once content sha is in this server's image store,
// fetching it from a live peer first when it is not. Concurrent callers
// for the same content wait for one fetch. Cancelling ctx returns
// ctx.Err() at once; the fetch goes on for the next caller.
func (s *Service) Ensure(ctx context.Context, sha string) error {
	if s.cfg.Blobs.Has(sha) {
		return nil
	}
	f := s.start(sha)
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start joins the fetch of sha in progress, or starts one.
func (s *Service) start(sha string) *flight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.flights[sha]; f != nil {
		return f
	}
	f := &flight{done: make(chan struct{})}
	s.flights[sha] = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f.err = s.fetch(sha)
		s.mu.Lock()
		delete(s.flights, sha)
		s.mu.Unlock()
		close(f.done)
	}()
	return f
}

// background fetches img's content unless a fetch of it runs, it failed
// within Retry, or the background slots are all busy; the next check
// tries again.
func (s *Service) background(img inventory.Image) {
	s.mu.Lock()
	_, running := s.flights[img.SHA256]
	r, failed := s.failed[img.SHA256]
	s.mu.Unlock()
	if running || (failed && s.cfg.Now().Before(r.next)) {
		return
	}
	select {
	case s.bg <- struct{}{}:
	default:
		return
	}
	s.log.Info("image copies: fetching a new image in the background", "image", img.Name, "sha256", img.SHA256, "size", img.Size)
	f := s.start(img.SHA256)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-f.done
		<-s.bg
		if f.err != nil && s.ctx.Err() == nil {
			s.mu.Lock()
			r := s.failed[img.SHA256]
			r.wait = min(max(2*r.wait, s.cfg.Retry), 16*s.cfg.Retry)
			r.next = s.cfg.Now().Add(r.wait)
			s.failed[img.SHA256] = r
			s.mu.Unlock()
			s.log.Warn("image copies: background fetch failed; trying again later", "image", img.Name, "sha256", img.SHA256,
				"retry_in", r.wait, "err", f.err)
		}
	}()
}

// maxResumes bounds how often a fetch resumes from one peer whose
// transfers keep breaking, as long as each one brought new bytes.
const maxResumes = 8

// fetch copies content sha from the first live peer, least loaded first,
// that gives it whole and matching; a failed or corrupt transfer is
// logged and the next peer asked. A transfer that broke after bringing
// bytes resumes where it stopped, from the same peer while each try
// brings more, else from the next.
func (s *Service) fetch(sha string) error {
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	img, peers, err := s.plan(ctx, sha)
	cancel()
	if err != nil {
		return err
	}
	var errs []string
	for _, p := range peers {
		base := membership.BaseURL(p)
		if base == "" {
			errs = append(errs, fmt.Sprintf("%s: registered no http:// address", p.Name))
			continue
		}
		var err error
		for try := 0; try <= maxResumes; try++ {
			from := s.cfg.Blobs.Partial(sha)
			if err = s.fetchFrom(img, p.Name, base, from); err == nil {
				return nil
			}
			if s.ctx.Err() != nil {
				return fmt.Errorf("images: fetch of %s stopped: the server is stopping", sha)
			}
			if s.cfg.Blobs.Partial(sha) <= from {
				break // no progress: this peer is not worth another try
			}
			s.log.Warn("image copies: transfer from peer broke; resuming where it stopped", "image", img.Name, "sha256", sha, "peer", p.Name,
				"url", base, "received", s.cfg.Blobs.Partial(sha), "size", img.Size, "err", err)
		}
		s.log.Warn("image copies: fetch from peer failed; asking the next", "image", img.Name, "sha256", sha, "peer", p.Name, "url", base, "err", err)
		errs = append(errs, fmt.Sprintf("%s: %v", p.Name, err))
	}
	return fmt.Errorf("images: content %.12s of image %s: no live peer gave it: %s", sha, img.Name, strings.Join(errs, "; "))
}

// fetchFrom copies the content of img from peer at base into the image
// store, from byte from on: where an earlier transfer stopped.
func (s *Service) fetchFrom(img inventory.Image, peer, base string, from int64) error {
	start := s.cfg.Now()
	body, err := s.cfg.Peers.Open(s.ctx, base, img.SHA256, from)
	if err != nil {
		return err
	}
	defer func() { body.Close() }()
	if body.Parent != "" && !s.cfg.Blobs.Has(body.Parent) {
		// A layer: its parent first (from whichever peer has it), then
		// the layer again, so the body does not idle out meanwhile.
		body.Close()
		if err := s.Ensure(s.ctx, body.Parent); err != nil {
			return fmt.Errorf("the parent %.12s of the layer: %w", body.Parent, err)
		}
		if body, err = s.cfg.Peers.Open(s.ctx, base, img.SHA256, 0); err != nil {
			return err
		}
	}
	var res imagestore.Imported
	switch {
	case body.Parent != "":
		res, err = s.cfg.Blobs.PutLayerCopy(s.ctx, body, img.SHA256, body.Parent, img.Size)
	case body.Size != img.Size:
		return fmt.Errorf("peer sends %d bytes, want the %d bytes of image %s", body.Size, img.Size, img.Name)
	default:
		res, err = s.cfg.Blobs.PutCopy(s.ctx, body, body.From, img.SHA256, img.Size)
	}
	if err != nil {
		return err
	}
	took := s.cfg.Now().Sub(start)
	s.log.Info("image copies: fetched image content from peer", "image", img.Name, "sha256", img.SHA256, "peer", peer, "url", base,
		"size", res.Size, "resumed_at", body.From, "received", res.Received, "allocated", res.Allocated, "layer_over", res.Parent, "seconds", took.Seconds(),
		"mib_per_sec", float64(res.Received)/(1<<20)/max(took.Seconds(), 1e-3))
	s.arrive(s.ctx, img.SHA256)
	return nil
}

// plan finds an image naming sha (for its size) and the live peers that
// hold it, least loaded first.
func (s *Service) plan(ctx context.Context, sha string) (inventory.Image, []inventory.ServerInfo, error) {
	listed := s.cfg.Now()
	imgs, err := s.contents(ctx)
	if err != nil {
		return inventory.Image{}, nil, fmt.Errorf("images: content %.12s: %w", sha, err)
	}
	i := slices.IndexFunc(imgs, func(img inventory.Image) bool { return img.SHA256 == sha })
	if i < 0 {
		return inventory.Image{}, nil, fmt.Errorf("images: no image names content %.12s (removed?); import the image again", sha)
	}
	s.mu.Lock()
	s.named[sha] = listed
	s.mu.Unlock()
	img := imgs[i]
	holders, err := s.cfg.Store.ImageHolders(ctx, sha)
	if err != nil {
		return img, nil, fmt.Errorf("images: image %s: reading which servers hold it: %w", img.Name, err)
	}
	now := s.cfg.Now()
	var live []inventory.ServerInfo
	var others []string
	for _, h := range holders {
		switch {
		case h.Name == s.cfg.Self:
		case h.Status(now) == inventory.ServerLive:
			live = append(live, h)
		default:
			others = append(others, h.Name+" ("+h.Status(now)+")")
		}
	}
	if len(live) == 0 {
		return img, nil, fmt.Errorf("images: image %s (content %.12s): no live server holds it (others: %s); start a server that holds it or import the image again",
			img.Name, sha, cmp.Or(strings.Join(others, ", "), "none"))
	}
	slices.SortStableFunc(live, func(a, b inventory.ServerInfo) int {
		return cmp.Or(cmp.Compare(a.Load.NBDSessions, b.Load.NBDSessions), cmp.Compare(a.Load.BytesPerSec, b.Load.BytesPerSec))
	})
	return img, live, nil
}
