package inventory

import (
	"errors"
	"strings"
	"testing"
)

// TestStep walks the whole state machine: every state, every step, the
// current production version apart from earlier ones. Each refused step
// must be an ErrConflict that says what to do instead.
func TestStep(t *testing.T) {
	type key struct {
		from    VersionState
		op      VersionOp
		current bool
	}
	allowed := map[key]VersionState{
		{VersionMaintenance, OpCommit, false}:  VersionTest,
		{VersionMaintenance, OpAbandon, false}: "",
		{VersionTest, OpPromote, false}:        VersionProduction,
		{VersionProduction, OpPromote, false}:  VersionProduction,
		{VersionProduction, OpRollback, true}:  VersionTest,
		{VersionTest, OpRetire, false}:         VersionRetired,
		{VersionProduction, OpRetire, false}:   VersionRetired,
	}
	refusedSays := map[key]string{
		{VersionTest, OpCommit, false}:          "only a maintenance version can be committed; this one is test",
		{VersionProduction, OpCommit, false}:    "only a maintenance version can be committed; this one is production",
		{VersionProduction, OpCommit, true}:     "only a maintenance version can be committed",
		{VersionRetired, OpCommit, false}:       "only a maintenance version can be committed; this one is retired",
		{VersionTest, OpAbandon, false}:         "retire it instead",
		{VersionProduction, OpAbandon, false}:   "retire it instead",
		{VersionProduction, OpAbandon, true}:    "retire it instead",
		{VersionRetired, OpAbandon, false}:      "only a maintenance version can be abandoned",
		{VersionMaintenance, OpPromote, false}:  "commit it first",
		{VersionProduction, OpPromote, true}:    "already the current production version",
		{VersionRetired, OpPromote, false}:      "import its content again",
		{VersionMaintenance, OpRollback, false}: "this one is maintenance",
		{VersionTest, OpRollback, false}:        "this one is test",
		{VersionProduction, OpRollback, false}:  "an earlier production version",
		{VersionRetired, OpRollback, false}:     "this one is retired",
		{VersionMaintenance, OpRetire, false}:   "abandoned (bootfleet image abandon)",
		{VersionProduction, OpRetire, true}:     "promote another version or roll back first",
		{VersionRetired, OpRetire, false}:       "already retired",
	}
	states := []VersionState{VersionMaintenance, VersionTest, VersionProduction, VersionRetired}
	ops := []VersionOp{OpCommit, OpAbandon, OpPromote, OpRollback, OpRetire}
	for _, from := range states {
		for _, op := range ops {
			for _, current := range []bool{false, true} {
				if current && from != VersionProduction {
					continue // only a production version can be current
				}
				k := key{from, op, current}
				got, err := Step(from, op, current)
				if want, ok := allowed[k]; ok {
					if err != nil || got != want {
						t.Errorf("Step(%s, %s, current=%v) = %q, %v; want %q", from, op, current, got, err, want)
					}
					continue
				}
				say, ok := refusedSays[k]
				if !ok {
					t.Fatalf("Step(%s, %s, current=%v): no expectation written", from, op, current)
				}
				if !errors.Is(err, ErrConflict) || got != from || !strings.Contains(err.Error(), say) {
					t.Errorf("Step(%s, %s, current=%v) = %q, %v; want a conflict saying %q, state kept", from, op, current, got, err, say)
				}
			}
		}
	}
	if _, err := Step(VersionTest, "merge", false); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown step: err = %v, want ErrInvalid", err)
	}
}

func TestImageVersionValidate(t *testing.T) {
	sha := strings.Repeat("a", 64)
	ok := ImageVersion{Image: "debian", SHA256: sha, Size: 4096, State: VersionTest}
	if err := ok.Validate(ok.Made); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*ImageVersion)
		field string
	}{
		{"bad state", func(v *ImageVersion) { v.State = "beta" }, "state"},
		{"born retired", func(v *ImageVersion) { v.State = VersionRetired }, "state"},
		{"negative parent", func(v *ImageVersion) { v.Parent = -1 }, "parent"},
		{"negative stored", func(v *ImageVersion) { v.Stored = -1 }, "stored"},
		{"maintenance without machine", func(v *ImageVersion) { v.State = VersionMaintenance }, "machine"},
		{"machine outside maintenance", func(v *ImageVersion) { v.Machine = "52:54:00:00:00:01" }, "machine"},
		{"bad sha", func(v *ImageVersion) { v.SHA256 = "x" }, "sha256"},
		{"bad name", func(v *ImageVersion) { v.Image = "a/b" }, "name"},
	} {
		v := ok
		tc.edit(&v)
		err := v.Validate(v.Made)
		var ie *Error
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: err = %v, want an error about %s", tc.name, err, tc.field)
		}
	}
}

// TestResolve: each channel picks its version, and a pin refuses what
// it cannot boot.
func TestResolve(t *testing.T) {
	vs := []ImageVersion{
		{Version: 1, State: VersionProduction},
		{Version: 2, State: VersionRetired},
		{Version: 3, State: VersionProduction},
		{Version: 4, State: VersionTest},
		{Version: 5, State: VersionMaintenance, Machine: "52:54:00:00:00:09"},
	}
	for _, tc := range []struct {
		channel string
		current int
		want    int
		kind    error
	}{
		{"", 3, 3, nil},
		{"production", 1, 1, nil},
		{"test", 3, 4, nil},
		{"1", 3, 1, nil},
		{"2", 3, 0, ErrConflict},
		{"5", 3, 0, ErrConflict},
		{"9", 3, 0, ErrNotFound},
		{"", 7, 0, ErrNotFound},
		{"beta", 3, 0, ErrInvalid},
	} {
		v, err := Resolve(vs, tc.current, tc.channel)
		if tc.kind != nil {
			if !errors.Is(err, tc.kind) {
				t.Errorf("Resolve(%q, current %d) = %v, %v; want %v", tc.channel, tc.current, v.Version, err, tc.kind)
			}
			continue
		}
		if err != nil || v.Version != tc.want {
			t.Errorf("Resolve(%q, current %d) = %d, %v; want %d", tc.channel, tc.current, v.Version, err, tc.want)
		}
	}
	if _, err := Resolve(vs[:2:2][1:], 0, "test"); !errors.Is(err, ErrNotFound) {
		t.Errorf("test channel with nothing in test: %v", err)
	}
	for _, ch := range []string{"0", "-1", "03", "x"} {
		if CheckChannel(ch) == "" {
			t.Errorf("CheckChannel(%q) accepted it", ch)
		}
	}
}
