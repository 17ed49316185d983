package imagecopies

import (
	"context"
	"io"

	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Import stores content on this server (Local.Import) and records the
// copy, so peers can fetch it at once. It implements api.ImageFiles with
// Release.
func (s *Service) Import(ctx context.Context, r io.Reader) (imagestore.Imported, error) {
	res, err := s.cfg.Local.Import(ctx, r)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	s.arrived[res.SHA256] = s.cfg.Now()
	s.mu.Unlock()
	s.arrive(ctx, res.SHA256)
	return res, nil
}

// Release deletes content (Local.Release) and, when it did, forgets the
// copy in the store. A store that cannot be written then leaves a row
// that names content this server lacks; a peer asking for it gets 404
// and asks the next, and the next start replaces the rows.
func (s *Service) Release(sha string) (bool, error) {
	deleted, err := s.cfg.Local.Release(sha)
	if err != nil || !deleted {
		return deleted, err
	}
	s.mu.Lock()
	delete(s.kept, sha)
	delete(s.arrived, sha)
	delete(s.named, sha)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	defer cancel()
	if err := s.cfg.Store.RemoveImageCopy(ctx, s.cfg.Self, sha); err != nil {
		s.log.Warn("image copies: forgetting a deleted copy in the store failed", "sha256", sha, "err", err)
	}
	return true, nil
}

// arrive records that content sha is now here.
func (s *Service) arrive(ctx context.Context, sha string) {
	s.mu.Lock()
	s.known[sha] = true
	delete(s.failed, sha)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := s.cfg.Store.AddImageCopy(ctx, inventory.ImageCopy{Server: s.cfg.Self, SHA256: sha, Since: s.cfg.Now()}); err != nil {
		s.log.Warn("image copies: recording a copy in the store failed; peers learn of it at this server's next start",
			"sha256", sha, "err", err)
	}
}
