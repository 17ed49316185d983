package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, tc := range []struct {
		name string
		data string
		perm os.FileMode
	}{
		{"create", "first", 0o600},
		{"replace", "second, longer than the first", 0o600},
		{"replace with shorter and another mode", "3", 0o644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := WriteFile(path, []byte(tc.data), tc.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != tc.data {
				t.Fatalf("read %q, %v; want %q", got, err, tc.data)
			}
			st, _ := os.Stat(path)
			if st.Mode().Perm() != tc.perm { // Chmod, unlike create, ignores the umask
				t.Fatalf("mode %v, want %v", st.Mode().Perm(), tc.perm)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) != 0 {
				t.Fatalf("temporary files left behind: %v", left)
			}
		})
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("sync of a missing directory succeeded")
	}
}
