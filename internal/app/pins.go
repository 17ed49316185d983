package app

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
	"github.com/bootfleet/bootfleet/internal/inventorysvc"
)

// CheckPins checks the config's version pins against the inventory's image
// versions, as the server does when it starts: for bootfleet check. An
// SQLite inventory that does not exist yet is not made; checked is then
// false.
func CheckPins(ctx context.Context, c *config.Config) (checked bool, err error) {
	if !inventorysvc.Shared(c.Store) {
		path := c.Store
		if path == "" {
			path = filepath.Join(c.Data, sqlite.FileName)
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	}
	if !hasPins(c) {
		return false, nil
	}
	store, err := inventorysvc.OpenStore(ctx, c.Store, c.Data)
	if err != nil {
		return false, err
	}
	defer store.Close()
	return true, inventorysvc.CheckConfigPins(ctx, store, c)
}

// hasPins says whether any profile or machine of c names a root channel.
func hasPins(c *config.Config) bool {
	for _, p := range c.Profiles {
		if strings.TrimSpace(p.Root.Channel) != "" {
			return true
		}
	}
	for _, m := range c.Machines {
		if m.RootChannel != "" {
			return true
		}
	}
	return false
}
