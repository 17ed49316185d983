package identity

import (
	"path"
	"strings"
	"testing"
)

// FuzzDecode: whatever Decode accepts is safe for the agent to write: no
// path leaves the root, no mode has more than permission bits, and it
// encodes and decodes to the same identity.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := Decode(b)
		if err != nil {
			return
		}
		for _, fl := range id.Files {
			if !strings.HasPrefix(fl.Path, "/") || path.Clean(fl.Path) != fl.Path || strings.Contains(fl.Path, "/../") || fl.Mode > 0o7777 {
				t.Fatalf("accepted file %q mode %#o", fl.Path, fl.Mode)
			}
		}
		again, err := Encode(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-encoded identity refused: %v", err)
		}
	})
}
