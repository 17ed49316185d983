package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type listerFunc func(string) ([]ImageVersion, error)

func (f listerFunc) ListImageVersions(_ context.Context, image string) ([]ImageVersion, error) {
	return f(image)
}

// TestCheckPin: a pin passes only for a version the image can boot, and
// every refusal lists the versions there are.
func TestCheckPin(t *testing.T) {
	vs := []ImageVersion{
		{Image: "lab", Version: 1, State: VersionProduction}, {Image: "lab", Version: 2, State: VersionTest},
		{Image: "lab", Version: 3, State: VersionRetired}, {Image: "lab", Version: 4, State: VersionMaintenance, Machine: "52:54:00:00:00:01"},
	}
	for _, tc := range []struct {
		vs      []ImageVersion
		channel string
		want    []string // nil: no error
	}{
		{vs, "", nil}, {vs, "production", nil}, {vs, "test", nil}, {vs, "1", nil}, {vs, "2", nil},
		{vs, "3", []string{"version 3 is retired", "pin one of 1 (production), 2 (test)"}},
		{vs, "4", []string{"open for maintenance by 52:54:00:00:00:01", "1 (production), 2 (test)"}},
		{vs, "9", []string{"image lab has no version 9", "1 (production), 2 (test), 3 (retired), 4 (maintenance)", "bootfleet image versions lab"}},
		{nil, "1", []string{"image lab has no versions", "bootfleet image import lab FILE"}},
		{vs[2:3], "3", []string{"retired", "none (no version is in test or production)"}},
	} {
		err := CheckPin("lab", tc.vs, tc.channel)
		if tc.want == nil {
			if err != nil {
				t.Errorf("pin %q: %v, want it accepted", tc.channel, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("pin %q over %d versions: %v, want ErrInvalid", tc.channel, len(tc.vs), err)
			continue
		}
		for _, w := range append(tc.want, "root_channel: ") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("pin %q: %q lacks %q", tc.channel, err, w)
			}
		}
	}
}

// TestCheckPinIn: an image not imported is ErrInvalid and ErrNoImage; a
// failing store is neither; a channel that pins nothing reads nothing.
func TestCheckPinIn(t *testing.T) {
	ctx := context.Background()
	missing := listerFunc(func(string) ([]ImageVersion, error) { return nil, NotFound("image", "no image") })
	if err := CheckPinIn(ctx, missing, "lab", "2"); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrNoImage) || !strings.Contains(err.Error(), "image lab is not imported") {
		t.Errorf("pin of an image not imported: %v", err)
	}
	broken := listerFunc(func(string) ([]ImageVersion, error) { return nil, errors.New("db down") })
	if err := CheckPinIn(ctx, broken, "lab", "2"); err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrNoImage) {
		t.Errorf("pin with a failing store: %v, want the store's error", err)
	}
	if err := CheckPinIn(ctx, broken, "lab", "test"); err != nil {
		t.Errorf("test channel: %v, want no read", err)
	}
	if err := CheckPinIn(ctx, broken, "", "1"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no root image") {
		t.Errorf("pin with no image: %v", err)
	}
}
