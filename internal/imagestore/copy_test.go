package imagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
		{"long", context.Background(), append(bytes.Clone(data), 0), sha, int64(len(data)), ErrMismatch},
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
			res, err := s.PutCopy(tt.ctx, bytes.NewReader(tt.body), 0, tt.sha, tt.size)
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

// cutReader gives the first n bytes of b, then fails as a broken
// connection does.
type cutReader struct {
	r *bytes.Reader
	n int64
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	k, err := c.r.Read(p[:min(int64(len(p)), c.n)])
	c.n -= int64(k)
	return k, err
}

// TestPutCopyResume: a copy cut at 90% keeps what arrived, the next copy
// sends only the rest and the content is stored whole, hashed over the
// kept bytes and the new ones; a short read is kept too. A resume at the
// wrong offset is refused, and a resumed copy whose kept bytes are
// corrupt is dropped whole, so the next one starts from 0.
func TestPutCopyResume(t *testing.T) {
	data := append(bytes.Repeat([]byte{0}, 5*blockSize+17), bytes.Repeat([]byte("resumable content "), 3000)...)
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	size := int64(len(data))
	cut := size * 9 / 10
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.PutCopy(ctx, &cutReader{bytes.NewReader(data), cut}, 0, sha, size); err == nil || !strings.Contains(err.Error(), "reset") {
		t.Fatalf("PutCopy through a connection cut at 90%% = %v, want the reset", err)
	}
	if got := s.Partial(sha); got != cut {
		t.Fatalf("Partial after a cut at byte %d = %d", cut, got)
	}
	if _, err := s.PutCopy(ctx, bytes.NewReader(data[cut-1:]), cut-1, sha, size); err == nil || !strings.Contains(err.Error(), "resume at") {
		t.Fatalf("PutCopy resuming at the wrong byte = %v, want it refused", err)
	}
	// A short read (a peer that closed cleanly) is kept as well.
	if _, err := s.PutCopy(ctx, bytes.NewReader(data[cut:cut+100]), cut, sha, size); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("PutCopy of a short rest = %v, want io.ErrUnexpectedEOF", err)
	}
	from := s.Partial(sha)
	if from != cut+100 {
		t.Fatalf("Partial after a short read = %d, want %d", from, cut+100)
	}
	rest := &countReader{r: bytes.NewReader(data[from:])}
	res, err := s.PutCopy(ctx, rest, from, sha, size)
	if err != nil || res.SHA256 != sha || res.Size != size {
		t.Fatalf("resumed PutCopy = %+v, %v; want %s stored", res, err, sha)
	}
	if rest.n != size-from {
		t.Errorf("the resume read %d bytes, want only the %d missing", rest.n, size-from)
	}
	if got := s.Partial(sha); got != 0 {
		t.Errorf("Partial after the copy completed = %d, want 0", got)
	}
	f, _ := s.OpenContent(sha)
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("stored content differs from the original")
	}

	// Kept bytes that are not the content's prefix: the whole is refused.
	other := bytes.Clone(data)
	other[3] = 'X'
	sum2 := sha256.Sum256(data[:size-1])
	sha2 := hex.EncodeToString(sum2[:])
	if _, err := s.PutCopy(ctx, &cutReader{bytes.NewReader(other), cut}, 0, sha2, size-1); err == nil {
		t.Fatal("cut copy succeeded")
	}
	if _, err := s.PutCopy(ctx, bytes.NewReader(data[cut:size-1]), cut, sha2, size-1); !errors.Is(err, ErrMismatch) {
		t.Fatalf("resume over corrupt kept bytes = %v, want ErrMismatch", err)
	}
	if got := s.Partial(sha2); got != 0 {
		t.Errorf("Partial after a mismatch = %d, want 0: the next copy starts over", got)
	}
	// Remove drops a partial copy with the content.
	s.PutCopy(ctx, &cutReader{bytes.NewReader(data), cut}, 0, sha2, size-1)
	if err := s.Remove(sha2); err != nil || s.Partial(sha2) != 0 {
		t.Errorf("Remove = %v, Partial after = %d; want the partial copy gone", err, s.Partial(sha2))
	}
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
