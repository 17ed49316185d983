package images

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/imagepeer"
	"github.com/bootfleet/bootfleet/internal/imagestore"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestFetchLayer: a version stored as a layer on a peer crosses the
// network as that layer, after its parent when this server lacks it, and
// is stored here as a layer over the parent, checked by its sha256.
func TestFetchLayer(t *testing.T) {
	for _, haveParent := range []bool{true, false} {
		f := newFleet(t)
		ctx := context.Background()
		src, err := imagestore.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		v1, err := src.ImportContext(ctx, bytes.NewReader(f.content))
		if err != nil {
			t.Fatal(err)
		}
		v2content := bytes.Clone(f.content)
		copy(v2content[100<<10:], "the second version")
		v2, err := src.ImportOver(ctx, bytes.NewReader(v2content), v1.SHA256)
		if err != nil || v2.Parent == "" {
			t.Fatalf("peer's ImportOver = %+v, %v", v2, err)
		}
		if _, err := f.store.AddImageVersion(ctx, inventory.ImageVersion{Image: "debian", SHA256: v2.SHA256, Size: v2.Size,
			Parent: 1, State: inventory.VersionTest, Stored: v2.Allocated}); err != nil {
			t.Fatal(err)
		}
		var sent atomic.Int64
		h := imagepeer.Handler(imagepeer.HandlerConfig{Content: src, Secret: secret})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cw := &countWriter{ResponseWriter: w, n: &sent}
			h.ServeHTTP(cw, r)
		}))
		t.Cleanup(srv.Close)
		f.peer("peer", srv.URL, 0, time.Now())
		if err := f.store.AddImageCopy(ctx, inventory.ImageCopy{Server: "peer", SHA256: v2.SHA256}); err != nil {
			t.Fatal(err)
		}
		if haveParent {
			if _, err := f.blobs.ImportContext(ctx, bytes.NewReader(f.content)); err != nil {
				t.Fatal(err)
			}
		}
		s := f.service(time.Second)
		if err := s.Ensure(ctx, v2.SHA256); err != nil {
			t.Fatal(err)
		}
		if !f.blobs.Has(v1.SHA256) || f.blobs.Parent(v2.SHA256) != v1.SHA256 {
			t.Fatalf("have parent %v: after the fetch, parent here %v, v2 a layer over it: %q", haveParent, f.blobs.Has(v1.SHA256), f.blobs.Parent(v2.SHA256))
		}
		if haveParent && sent.Load() > 256<<10 {
			t.Fatalf("fetching a layer of %d bytes sent %d bytes, want the layer only", v2.Allocated, sent.Load())
		}
		if !strings.Contains(f.log.String(), "layer_over="+v1.SHA256) {
			t.Fatalf("the log does not say a layer was fetched:\n%s", f.log)
		}
	}
}

// TestLayerCopyMismatch: a layer that does not read as the content it is
// for is refused and nothing is stored.
func TestLayerCopyMismatch(t *testing.T) {
	f := newFleet(t)
	ctx := context.Background()
	src, _ := imagestore.Open(t.TempDir())
	v1, _ := src.ImportContext(ctx, bytes.NewReader(f.content))
	v2content := bytes.Clone(f.content)
	copy(v2content[100<<10:], "the second version")
	v2, _ := src.ImportOver(ctx, bytes.NewReader(v2content), v1.SHA256)
	if _, err := f.blobs.ImportContext(ctx, bytes.NewReader(f.content)); err != nil {
		t.Fatal(err)
	}
	layer, err := src.OpenContent(v2.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	defer layer.Close()
	wrong := strings.Repeat("0", 64)
	if _, err := f.blobs.PutLayerCopy(ctx, layer, wrong, v1.SHA256, v2.Size); err == nil || !strings.Contains(err.Error(), "want "+wrong) {
		t.Fatalf("a layer under the wrong hash: %v, want a mismatch naming it", err)
	}
	if f.blobs.Has(wrong) {
		t.Fatal("a mismatching layer was stored")
	}
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.ResponseWriter.Write(b)
}
