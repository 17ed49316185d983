package imagestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImport(t *testing.T) {
	data := t.TempDir()
	s, err := Open(data)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("bootfleet"), 10000)
	want := sha256.Sum256(content)
	tests := []struct {
		name    string
		r       io.Reader
		wantErr string
	}{
		{"new", bytes.NewReader(content), ""},
		{"again", bytes.NewReader(content), ""},
		{"empty", strings.NewReader(""), "empty"},
		{"broken upload", io.MultiReader(bytes.NewReader(content[:100]), errReader{}), "after 100 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, size, err := s.Import(tt.r)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sum != hex.EncodeToString(want[:]) || size != int64(len(content)) {
				t.Fatalf("got %s %d, want %x %d", sum, size, want, len(content))
			}
			p, _ := s.Path(sum)
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("stored content differs (%v)", err)
			}
		})
	}
	if tmps, _ := os.ReadDir(filepath.Join(data, "images", "tmp")); len(tmps) != 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
	sum := hex.EncodeToString(want[:])
	if err := s.Remove(sum); err != nil || s.Has(sum) {
		t.Fatalf("Remove: %v, still there: %v", err, s.Has(sum))
	}
	if _, err := s.Path("../../etc/passwd"); !errors.Is(err, ErrBadHash) {
		t.Fatalf("Path of a bad hash: %v, want ErrBadHash", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
