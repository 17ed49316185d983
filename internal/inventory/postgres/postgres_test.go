package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/storetest"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

type backend struct{}

var dsnOf sync.Map // inventory.Store -> DSN

func (backend) New(t *testing.T) inventory.Store { return open(t, testutil.FreshPostgres(t)) }

func (backend) Reopen(t *testing.T, s inventory.Store) inventory.Store {
	dsn, _ := dsnOf.Load(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, dsn.(string))
}

func open(t *testing.T, dsn string) inventory.Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	dsnOf.Store(s, dsn)
	t.Cleanup(func() { s.Close(); dsnOf.Delete(s) })
	return s
}

func TestStore(t *testing.T) { storetest.Run(t, backend{}) }

// TestConcurrentMigration starts several servers on one empty database at
// once, as a fleet rebooting together would: the advisory lock must make
// them migrate one after the other instead of failing.
func TestConcurrentMigration(t *testing.T) {
	dsn := testutil.FreshPostgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"host=h password=secret", "(key=value DSN)"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOpenBadDSN(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://nobody:pw@127.0.0.1:1/none?connect_timeout=2")
	if err == nil || strings.Contains(err.Error(), ":pw@") || !strings.Contains(err.Error(), "is the server running") {
		t.Fatalf("got %v, want a connection error with the password hidden", err)
	}
}
