package diskless

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/chunkwire"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/readorder"
)

// nowOnly answers ReadNow below 1 MiB and leaves the rest to ReadSpan.
type nowOnly struct{ nbd.Export }

func (nowOnly) ReadNow(p []byte, off int64, _ bool) (nbd.Span, bool) {
	return nbd.Span{Bytes: p}, off < 1<<20
}

func (nowOnly) ReadSpan(p []byte, _ int64) (nbd.Span, error) { return nbd.Span{Bytes: p}, nil }

// TestReadOrderLearnedAndServed: the NBD reads of an export teach the
// server the order its content is read in, the chunks each read touches
// in the order read, and the order is served by its sha256.
func TestReadOrderLearnedAndServed(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	s := &Service{order: readorder.NewLearner(t.TempDir(), nil)}
	x := learningExport{Export: nowOnly{}, sha: sha, order: s.order}
	const cs = chunkwire.ChunkSize
	for _, r := range []struct {
		off int64
		n   int
		now bool
	}{{5 * cs, 2 * cs, true}, {cs + 100, 10, true}, {40 * cs, cs + 1, false}, {5 * cs, cs, true}} {
		if r.now {
			if _, ok := x.ReadNow(make([]byte, r.n), r.off, false); !ok {
				t.Fatalf("ReadNow(%d) not answered", r.off)
			}
		} else if _, err := x.ReadSpan(make([]byte, r.n), r.off); err != nil {
			t.Fatal(err)
		}
	}
	// A ReadNow the export declines is read again by ReadSpan: not noted twice.
	x.ReadNow(make([]byte, 10), 2<<20, false)

	for _, tc := range []struct {
		path string
		code int
		want []uint32
	}{
		{ReadOrderPath + sha, http.StatusOK, []uint32{5, 6, 1, 40, 41}},
		{ReadOrderPath + strings.Repeat("cd", 32), http.StatusNotFound, nil},
		{ReadOrderPath + "../x", http.StatusBadRequest, nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.ReadOrderHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if w.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if tc.code != http.StatusOK {
				return
			}
			got, err := readorder.Decode(w.Body.Bytes())
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("order %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
