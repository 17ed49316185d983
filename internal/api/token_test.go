package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateToken(t *testing.T) {
	dir := t.TempDir()
	tok, err := LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Fatalf("token %q, want 64 hex digits", tok)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (%v), want 0600", fi.Mode(), err)
	}
	again, err := LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Fatalf("second start got %q (%v), want the same token", again, err)
	}
	other, _ := LoadOrCreateToken(t.TempDir())
	if other == tok {
		t.Fatal("two data directories got the same token")
	}
}

func TestReadTokenRefuses(t *testing.T) {
	tests := []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"world readable", strings.Repeat("a", 64), 0o644, "chmod 600"},
		{"empty", "\n", 0o600, "too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), TokenFile)
			os.WriteFile(p, []byte(tt.content), tt.mode)
			os.Chmod(p, tt.mode)
			if _, err := ReadToken(p); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := LoadOrCreateToken(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("no error for a missing data directory")
	}
}
