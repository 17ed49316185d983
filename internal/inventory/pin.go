package inventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CheckPin refuses a root channel that pins a version image cannot boot:
// one it does not have, a retired one, or one open for maintenance. The
// error lists the versions the image has, so the admin can pick one.
// Channels that follow production or test, and pins of a version the
// image can boot, pass.
func CheckPin(image string, vs []ImageVersion, channel string) error {
	n, err := strconv.Atoi(channel)
	if err != nil {
		return nil // production, test or "": nothing pinned (CheckChannel checks the spelling)
	}
	for _, v := range vs {
		if v.Version != n {
			continue
		}
		switch v.State {
		case VersionRetired:
			return invalid("root_channel", "image %s version %d is retired; pin one of %s, or follow production", image, n, bootable(vs))
		case VersionMaintenance:
			return invalid("root_channel", "image %s version %d is open for maintenance by %s and boots only there until it is committed; pin one of %s", image, n, v.Machine, bootable(vs))
		}
		return nil
	}
	if len(vs) == 0 {
		return invalid("root_channel", "image %s has no versions to pin version %d of; import it first (bootfleet image import %s FILE)", image, n, image)
	}
	return invalid("root_channel", "image %s has no version %d; its versions are %s (bootfleet image versions %s)", image, n, listVersions(vs), image)
}

// VersionLister is the part of ImageVersions that CheckPinIn reads.
type VersionLister interface {
	ListImageVersions(ctx context.Context, image string) ([]ImageVersion, error)
}

// ErrNoImage marks a CheckPinIn error about an image not imported yet,
// which a config applied before the first import may let pass.
var ErrNoImage = errors.New("image not imported")

type noImageError struct{ err *Error }

func (e noImageError) Error() string   { return e.err.Error() }
func (e noImageError) Unwrap() []error { return []error{e.err, ErrNoImage} }

// CheckPinIn is CheckPin with the versions read from s; for an image not
// imported yet it fails with an ErrInvalid error that is also ErrNoImage.
func CheckPinIn(ctx context.Context, s VersionLister, image, channel string) error {
	if _, err := strconv.Atoi(channel); err != nil {
		return nil
	}
	if image == "" {
		return invalid("root_channel", "pins version %s of no image: the profile has no root image", channel)
	}
	vs, err := s.ListImageVersions(ctx, image)
	if errors.Is(err, ErrNotFound) {
		return noImageError{&Error{Kind: ErrInvalid, Field: "root_channel",
			Msg: fmt.Sprintf("image %s is not imported, so it has no version %s; import it first (bootfleet image import %s FILE)", image, channel, image)}}
	}
	if err != nil {
		return fmt.Errorf("read the versions of image %s to check root_channel %s: %w", image, channel, err)
	}
	return CheckPin(image, vs, channel)
}

// listVersions is "1 (production), 2 (test), 3 (retired)".
func listVersions(vs []ImageVersion) string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%d (%s)", v.Version, v.State))
	}
	return strings.Join(out, ", ")
}

// bootable lists the versions a pin may name, or says there is none.
func bootable(vs []ImageVersion) string {
	var ok []ImageVersion
	for _, v := range vs {
		if v.State == VersionTest || v.State == VersionProduction {
			ok = append(ok, v)
		}
	}
	if len(ok) == 0 {
		return "none (no version is in test or production)"
	}
	return listVersions(ok)
}
