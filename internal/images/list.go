package images

import (
	"context"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Listed is an image with the servers of the fleet holding its content.
type Listed struct {
	inventory.Image
	// Holders are ordered by server name; none yet when no server has
	// recorded the content.
	Holders []Holder
}

// Holder is a server holding content, with its status now: live, stale,
// stopped, or unknown (not registered).
type Holder struct {
	Server, Status string
}

// List returns every image, ordered by name, with its holders.
func (s *Service) List(ctx context.Context) ([]Listed, error) {
	imgs, err := s.cfg.Store.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	holders, err := s.holders(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Listed, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, Listed{Image: img, Holders: holders[img.SHA256]})
	}
	return out, nil
}

// Get returns image name with its holders, or an inventory.ErrNotFound
// error.
func (s *Service) Get(ctx context.Context, name string) (Listed, error) {
	img, err := s.cfg.Store.GetImage(ctx, name)
	if err != nil {
		return Listed{}, err
	}
	holders, err := s.holders(ctx)
	if err != nil {
		return Listed{}, err
	}
	return Listed{Image: img, Holders: holders[img.SHA256]}, nil
}

// holders maps each content to the servers holding it.
func (s *Service) holders(ctx context.Context) (map[string][]Holder, error) {
	copies, err := s.cfg.Store.ListImageCopies(ctx)
	if err != nil {
		return nil, err
	}
	servers, err := s.cfg.Store.ListServers(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	status := make(map[string]string, len(servers))
	for _, si := range servers {
		status[si.Name] = si.Status(now)
	}
	out := map[string][]Holder{}
	for _, c := range copies { // ordered by content, then server
		st := status[c.Server]
		if st == "" {
			st = "unknown"
		}
		out[c.SHA256] = append(out[c.SHA256], Holder{Server: c.Server, Status: st})
	}
	return out, nil
}
