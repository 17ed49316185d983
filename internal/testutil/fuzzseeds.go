package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSeeds keeps testdata/fuzz/TARGET/NAME holding each of seeds, one
// []byte argument each, in go test's corpus format. Under
// UPDATE_TESTDATA=1 it writes them; otherwise it fails t for a seed that is
// missing or differs, so a change of format cannot leave a fuzzer starting
// from stale bytes.
func FuzzSeeds(t testing.TB, target string, seeds map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	update := os.Getenv("UPDATE_TESTDATA") == "1"
	for name, b := range seeds {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		path := filepath.Join(dir, name)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (%v); UPDATE_TESTDATA=1 rewrites it", path, err)
		}
	}
}
