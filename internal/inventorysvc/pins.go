package inventorysvc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// CheckConfigPins refuses a config whose profiles or machines pin a
// version (root.channel, root_channel: a number) that their image in s
// cannot boot, naming the key and the versions there are. A pin of an
// image not imported yet passes: the image is imported through a running
// server, and its boots fail, saying so, until it is.
func CheckConfigPins(ctx context.Context, s inventory.VersionLister, c *config.Config) error {
	check := func(key, image, channel string) error {
		err := inventory.CheckPinIn(ctx, s, image, channel)
		if err == nil || errors.Is(err, inventory.ErrNoImage) {
			return nil
		}
		var ie *inventory.Error
		if errors.As(err, &ie) {
			return fmt.Errorf("%s: %s", key, ie.Msg)
		}
		return fmt.Errorf("%s: %w", key, err)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Profiles)) {
		r := c.Profiles[name].Root
		if err := check("profiles."+name+".root.channel", r.Image, r.Channel); err != nil {
			return err
		}
	}
	for i, m := range c.Machines {
		if m.RootChannel == "" {
			continue
		}
		p, ok := c.Profiles[m.Profile]
		if !ok {
			continue // the config's validation refuses a machine of a profile it does not declare
		}
		if err := check(fmt.Sprintf("machines[%d].root_channel", i), p.Root.Image, m.RootChannel); err != nil {
			return err
		}
	}
	return nil
}
