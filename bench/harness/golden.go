package harness

import (
	"os"
	"testing"
)

// Golden fails t when got differs from the file at path; with
// UPDATE_TESTDATA=1 it first rewrites the file. The benches' report tests
// keep each report's exact wording this way.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if os.Getenv("UPDATE_TESTDATA") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_TESTDATA=1 to create it)", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s; rerun with UPDATE_TESTDATA=1 and review the diff", path)
	}
}
