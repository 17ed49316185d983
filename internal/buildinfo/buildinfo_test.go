package buildinfo

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, tc := range []struct{ stamped, want string }{
		{"", "dev"},
		{"v0.4.0-12-gabc1234", "0.4.0-12-gabc1234"},
		{"abc1234-dirty", "abc1234-dirty"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			defer func(v string) { version = v }(version)
			version = tc.stamped
			if got := Version(); got != tc.want {
				t.Errorf("Version() with %q stamped = %q, want %q", tc.stamped, got, tc.want)
			}
			if s := String(); !strings.HasPrefix(s, "bootfleet "+tc.want+" (go") {
				t.Errorf("String() = %q", s)
			}
		})
	}
}
