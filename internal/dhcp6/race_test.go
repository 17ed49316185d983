package dhcp6_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/bootfleet/bootfleet/internal/dhcp6"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/postgres"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestMain provides BOOTFLEET_TEST_PG when it is unset (see
// testutil.PostgresMain), for servers sharing a PostgreSQL store.
func TestMain(m *testing.M) { os.Exit(testutil.PostgresMain(m)) }

// eachStore runs f on a fresh SQLite store and a fresh PostgreSQL one.
func eachStore(t *testing.T, f func(t *testing.T, st inventory.Store)) {
	t.Run("sqlite", func(t *testing.T) { f(t, openStore(t, filepath.Join(t.TempDir(), "inv.db"))) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), testutil.FreshPostgres(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

// loneServer is a fleet member that answers every client (its view of the
// fleet holds only itself) and starts its search at the range's first
// address: two of them pick the same addresses, as two servers do while
// their views of the fleet disagree.
func loneServer(t *testing.T, st inventory.Store, name string, mac byte) *dhcp6.Server {
	t.Helper()
	return fleetServer(t, st, name, []string{name}, mac)
}

// leaseFrom runs Solicit and Request for client id against s and returns the
// advertised and the granted address ("" for no answer).
func leaseFrom(s *dhcp6.Server, id int) (adv, got string) {
	a := exchange([]*dhcp6.Server{s}, clientMsg(dhcpv6.MessageTypeSolicit, id))[0]
	if a == nil {
		return "", ""
	}
	r := exchange([]*dhcp6.Server{s}, clientMsg(dhcpv6.MessageTypeRequest, id, dhcpv6.WithServerID(a.Options.ServerID())))[0]
	return grantedAddr(a), grantedAddr(r)
}

// TestNeverOffersAnotherServersLease: two servers read the store while it
// is empty; one then leases ten addresses. The other, whose picture of
// the store is that old, advertises none of them: it checks its pick
// with the store before the Advertise goes out, and every client's
// Request gets the address it was advertised.
func TestNeverOffersAnotherServersLease(t *testing.T) {
	eachStore(t, func(t *testing.T, st inventory.Store) {
		a, b := loneServer(t, st, "boot-a", 1), loneServer(t, st, "boot-b", 2)
		byB := map[string]int{}
		for id := 1; id <= 10; id++ {
			if _, got := leaseFrom(b, id); got == "" {
				t.Fatalf("client %d got no lease from boot-b", id)
			} else {
				byB[got] = id
			}
		}
		for id := 11; id <= 20; id++ {
			adv, got := leaseFrom(a, id)
			if prev, taken := byB[adv]; taken {
				t.Fatalf("boot-a advertised %s to client %d; boot-b leased it to client %d", adv, id, prev)
			}
			if adv == "" || got != adv {
				t.Fatalf("client %d: advertised %q, granted %q; want the advertised address granted", id, adv, got)
			}
		}
		if n := len(stored(t, st)); n != 20 {
			t.Errorf("the store holds %d leases, want 20", n)
		}
	})
}

// TestServersRaceForOnePool: two servers that both start at the range's
// first address lease to 30 clients each at the same time, from one
// store. The store's uniqueness decides each collision: no address is
// advertised or granted to two clients, and each client's Request gets
// the address it was advertised, because that address was stored for it
// before the Advertise went out.
func TestServersRaceForOnePool(t *testing.T) {
	eachStore(t, func(t *testing.T, st inventory.Store) {
		servers := []*dhcp6.Server{loneServer(t, st, "boot-a", 1), loneServer(t, st, "boot-b", 2)}
		const perServer = 30
		type result struct{ adv, got string }
		results := make([][]result, len(servers))
		var wg sync.WaitGroup
		for i, s := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 1; n <= perServer; n++ {
					adv, got := leaseFrom(s, i*perServer+n)
					results[i] = append(results[i], result{adv, got})
				}
			}()
		}
		wg.Wait()
		owner := map[string]int{}
		for i := range servers {
			for n, r := range results[i] {
				id := i*perServer + n + 1
				if r.adv == "" || r.got != r.adv {
					t.Errorf("client %d: advertised %q, granted %q; want the advertised address granted", id, r.adv, r.got)
					continue
				}
				if prev, dup := owner[r.got]; dup {
					t.Errorf("%s granted to clients %d and %d", r.got, prev, id)
				}
				owner[r.got] = id
			}
		}
		if n := len(stored(t, st)); n != len(servers)*perServer {
			t.Errorf("the store holds %d leases, want %d", n, len(servers)*perServer)
		}
	})
}
