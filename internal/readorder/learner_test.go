package readorder

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLearner(t *testing.T) {
	const sha = "ab"
	for _, tc := range []struct {
		name  string
		boots [][][2]uint32 // reads (first, last) of each boot
		want  []uint32
	}{
		{"first reads in order", [][][2]uint32{{{5, 6}, {0, 0}, {5, 5}, {2, 3}}}, []uint32{5, 6, 0, 2, 3}},
		// A later boot reading in another order keeps the first's ranks
		// and adds only what it read anew.
		{"an odd boot appends", [][][2]uint32{{{1, 3}}, {{9, 9}, {3, 1}, {1, 1}, {7, 7}}}, []uint32{1, 2, 3, 9, 7}},
		{"largest chunk", [][][2]uint32{{{1<<32 - 2, 1<<32 - 1}}}, []uint32{1<<32 - 2, 1<<32 - 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := NewLearner(dir, nil)
			if _, ok := l.Order(sha); ok {
				t.Fatal("an order before any boot")
			}
			for _, boot := range tc.boots {
				for _, r := range boot {
					l.Note(sha, r[0], r[1])
				}
			}
			l.Flush()
			// A new server reads what the old one learned.
			b, ok := NewLearner(dir, nil).Order(sha)
			if !ok {
				t.Fatal("no order after a restart")
			}
			got, err := Decode(b)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("order %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestLearnerRelearnsDamagedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cd"), []byte("BFRO\x01\x09"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := NewLearner(dir, nil)
	if _, ok := l.Order("cd"); ok {
		t.Fatal("a damaged file gave an order")
	}
	l.Note("cd", 4, 4)
	l.Flush()
	b, err := os.ReadFile(filepath.Join(dir, "cd"))
	if got, derr := Decode(b); err != nil || derr != nil || !slices.Equal(got, []uint32{4}) {
		t.Errorf("file after relearning: %v, %v, %v; want [4]", got, err, derr)
	}
}
