package imagepeer

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOpenFrom: a resume asks for the rest with a Range and reads only
// it; a peer that ignores the Range sends all of it, and Body.From says
// so; a peer that sends another range than the one asked for is refused.
func TestOpenFrom(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	data := bytes.Repeat([]byte("resume"), 50000)
	content, sha := stored(t, data)
	h := Handler(HandlerConfig{Content: content, Secret: key})
	c := &Client{Self: "boot-b", Secret: key}
	ctx := context.Background()
	from := int64(len(data)) * 9 / 10

	srv := httptest.NewServer(h)
	defer srv.Close()
	b, err := c.Open(ctx, srv.URL, sha, from)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	b.Close()
	if err != nil || b.From != from || b.Size != int64(len(data)) || !bytes.Equal(got, data[from:]) {
		t.Fatalf("Open from %d: From %d Size %d, read %d bytes, err %v; want the last %d bytes of %d", from, b.From, b.Size, len(got), err, int64(len(data))-from, len(data))
	}

	noRange := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Range")
		h.ServeHTTP(w, r)
	}))
	defer noRange.Close()
	b, err = c.Open(ctx, noRange.URL, sha, from)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(b)
	b.Close()
	if b.From != 0 || !bytes.Equal(got, data) {
		t.Fatalf("a peer ignoring Range: From %d, %d bytes; want From 0 and the whole content", b.From, len(got))
	}

	wrong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Range", "bytes=10-")
		h.ServeHTTP(w, r)
	}))
	defer wrong.Close()
	if _, err := c.Open(ctx, wrong.URL, sha, from); err == nil || !strings.Contains(err.Error(), "got bytes 10-") {
		t.Fatalf("a peer sending another range: %v, want it refused", err)
	}
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in                 string
		first, last, total int64
		wantErr            string
	}{
		{in: "bytes 0-9/10", last: 9, total: 10},
		{in: "bytes 90-99/100", first: 90, last: 99, total: 100},
		{in: "bytes */100", wantErr: "no FIRST-LAST"},
		{in: "bytes 0-9/*", wantErr: "decimal"},
		{in: "items 0-9/10", wantErr: "unit"},
		{in: "bytes 0-9", wantErr: "no /TOTAL"},
		{in: "bytes 9/10", wantErr: "no FIRST-LAST"},
		{in: "bytes 5-4/10", wantErr: "FIRST <= LAST < TOTAL"},
		{in: "bytes 0-10/10", wantErr: "FIRST <= LAST < TOTAL"},
		{in: "bytes -1-9/10", wantErr: "decimal"},
		{in: "bytes +1-9/10", wantErr: "decimal"},
		{in: "bytes 0-9/99999999999999999999", wantErr: "decimal"},
	} {
		first, last, total, err := ParseContentRange(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseContentRange(%q) = %d %d %d, %v; want error containing %q", tc.in, first, last, total, err, tc.wantErr)
			}
			continue
		}
		if err != nil || first != tc.first || last != tc.last || total != tc.total {
			t.Errorf("ParseContentRange(%q) = %d %d %d, %v; want %d %d %d", tc.in, first, last, total, err, tc.first, tc.last, tc.total)
		}
	}
}

// FuzzParseContentRange: any header value either gives a range inside
// its total or an error; never a panic. Seeds are in
// testdata/fuzz/FuzzParseContentRange.
func FuzzParseContentRange(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		first, last, total, err := ParseContentRange(v)
		if err != nil {
			return
		}
		if first < 0 || first > last || last >= total {
			t.Fatalf("ParseContentRange(%q) = %d %d %d", v, first, last, total)
		}
	})
}
