package inventory

import (
	"fmt"
	"strconv"
)

// The channels a profile's root follows (Root.Channel); a version number
// pins one version instead.
const (
	ChannelProduction = "production" // stored as ""
	ChannelTest       = "test"
)

// CheckChannel says what is wrong with a channel, or "" if nothing.
func CheckChannel(ch string) string {
	switch ch {
	case "", ChannelProduction, ChannelTest:
		return ""
	}
	if n, err := strconv.Atoi(ch); err != nil || n < 1 || strconv.Itoa(n) != ch {
		return fmt.Sprintf("want production, test or a version number to pin (1, 2, ...), got %q", ch)
	}
	return ""
}

// Resolve picks the version of an image a channel boots, given the
// image's versions and its current production version: production (""),
// the current one; test, the newest in test or production; a number,
// that version, unless it is retired or in maintenance.
func Resolve(vs []ImageVersion, current int, channel string) (ImageVersion, error) {
	pick := func(ok func(ImageVersion) bool) (ImageVersion, bool) {
		for i := len(vs) - 1; i >= 0; i-- {
			if ok(vs[i]) {
				return vs[i], true
			}
		}
		return ImageVersion{}, false
	}
	switch channel {
	case "", ChannelProduction:
		if v, ok := pick(func(v ImageVersion) bool { return v.Version == current }); ok {
			return v, nil
		}
		return ImageVersion{}, NotFound("version", "the image has no current production version %d", current)
	case ChannelTest:
		if v, ok := pick(func(v ImageVersion) bool { return v.State == VersionTest || v.State == VersionProduction }); ok {
			return v, nil
		}
		return ImageVersion{}, NotFound("version", "the image has no version in test or production")
	}
	n, err := strconv.Atoi(channel)
	if err != nil {
		return ImageVersion{}, invalid("root_channel", "%s", CheckChannel(channel))
	}
	v, ok := pick(func(v ImageVersion) bool { return v.Version == n })
	switch {
	case !ok:
		return v, NotFound("version", "the image has no version %d to pin; see bootfleet image versions", n)
	case v.State == VersionRetired:
		return v, Conflict("version", "pinned version %d is retired; pin another or follow production", n)
	case v.State == VersionMaintenance:
		return v, Conflict("version", "pinned version %d is open for maintenance by %s; only that machine boots it, until it is committed", n, v.Machine)
	}
	return v, nil
}
