package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestPutCopy(t *testing.T) {
	data := append(bytes.Repeat([]byte{0}, 3*blockSize), []byte("a raw disk that looks like nothing in particular")...)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		body []byte
		sha  string
		size int64
		want error // nil: stored
	}{
		{"good", context.Background(), data, sha, int64(len(data)), nil},
		{"corrupt", context.Background(), append(bytes.Clone(data[:len(data)-1]), 'X'), sha, int64(len(data)), ErrMismatch},
		{"short", context.Background(), data[:len(data)-5], sha, int64(len(data)), ErrMismatch},
		{"size lie", context.Background(), data, sha, 7, ErrMismatch},
		{"bad sha", context.Background(), data, "XYZ", int64(len(data)), ErrBadHash},
		{"cancelled", cancelled, data, sha, int64(len(data)), context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.PutCopy(tt.ctx, bytes.NewReader(tt.body), tt.sha, tt.size)
			if !errors.Is(err, tt.want) {
				t.Fatalf("PutCopy error = %v, want %v", err, tt.want)
			}
			if tmp, _ := filepath.Glob(filepath.Join(dir, "images", "tmp", "*")); len(tmp) != 0 {
				t.Fatalf("temporary files left: %v", tmp)
			}
			list, _ := s.List()
			if tt.want != nil {
				if len(list) != 0 {
					t.Fatalf("List after a failed copy = %v, want nothing", list)
				}
				return
			}
			if res.SHA256 != sha || res.Size != int64(len(data)) || !reflect.DeepEqual(list, []string{sha}) {
				t.Fatalf("PutCopy = %+v, List = %v; want %s of %d bytes", res, list, sha, len(data))
			}
			f, err := s.OpenContent(sha)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got, data) || st.Mode().Perm() != 0o440 {
				t.Fatalf("stored %d bytes, mode %v; want the copy, read-only", len(got), st.Mode())
			}
		})
	}
}
