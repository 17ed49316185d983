package storm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestFetchImageFallsBack: a URL that fails hands over to the next, as
// iPXE's || does, and the image that loaded is the one returned.
func TestFetchImageFallsBack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(strings.Repeat("k", 1000)))
	}))
	defer srv.Close()
	img := func(path, args string) Image { return Image{Name: "k", URL: srv.URL + path, Args: args} }
	tests := []struct {
		name      string
		img       Image
		wantArgs  string
		fallbacks int
		wantErr   bool
	}{
		{"the first URL", Image{Name: "k", URL: srv.URL + "/k", Args: "a", Alt: []Image{img("/k2", "b")}}, "a", 0, false},
		{"a 404 takes the next", Image{Name: "k", URL: srv.URL + "/missing", Args: "a", Alt: []Image{img("/k2", "b")}}, "b", 1, false},
		{"an unknown scheme takes the next", Image{Name: "k", URL: "ftp://x/k", Args: "a", Alt: []Image{img("/missing", "b"), img("/k3", "c")}}, "c", 2, false},
		{"all fail", Image{Name: "k", URL: srv.URL + "/missing", Alt: []Image{img("/missing", "b")}}, "", 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &machine{cfg: &Config{}}
			f := newFetcher(netip.MustParseAddr("127.0.0.1"))
			defer f.close()
			got, r, err := m.fetchImage(context.Background(), f, netip.MustParseAddr("127.0.0.1"), tt.img)
			if (err != nil) != tt.wantErr || r.Fallbacks != tt.fallbacks {
				t.Fatalf("err %v, fallbacks %d; want error %v, %d fallbacks", err, r.Fallbacks, tt.wantErr, tt.fallbacks)
			}
			if tt.wantErr {
				return
			}
			if got.Args != tt.wantArgs || r.Via != "http" || r.Bytes != 1000 || r.MulticastBytes != 0 {
				t.Fatalf("loaded %+v via %q, %d bytes; want args %q, 1000 bytes by http", got, r.Via, r.Bytes, tt.wantArgs)
			}
		})
	}
}
