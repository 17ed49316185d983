package membership

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

type copiesTable struct {
	inventory.ImageCopies
	mu     sync.Mutex
	copies []inventory.ImageCopy
	err    error
}

func (c *copiesTable) ListImageCopies(context.Context) ([]inventory.ImageCopy, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.copies), c.err
}

func TestHoldings(t *testing.T) {
	const x, y = "x", "y"
	tab := &copiesTable{err: errors.New("no database")}
	h := NewHoldings(tab, 0, nil)
	h.Refresh(context.Background())
	if _, known := h.Holders(x); known {
		t.Fatal("known before any read")
	}
	tab.copies, tab.err = []inventory.ImageCopy{{Server: "a", SHA256: x}, {Server: "c", SHA256: x}, {Server: "b", SHA256: y}}, nil
	h.Refresh(context.Background())
	tests := []struct {
		sha   string
		want  []string
		known bool
	}{{x, []string{"a", "c"}, true}, {y, []string{"b"}, true}, {"z", nil, false}}
	for _, tt := range tests {
		t.Run(tt.sha, func(t *testing.T) {
			got, known := h.Holders(tt.sha)
			if !slices.Equal(got, tt.want) || known != tt.known {
				t.Errorf("Holders(%s) = %v, %v; want %v, %v", tt.sha, got, known, tt.want, tt.known)
			}
		})
	}
	tab.err = errors.New("connection refused")
	h.Refresh(context.Background())
	if got, known := h.Holders(x); !known || len(got) != 2 {
		t.Errorf("after a failed read Holders(x) = %v, %v; want the last picture", got, known)
	}
}
