package app

import (
	"os"
	"testing"

	"github.com/bootfleet/bootfleet/internal/testutil"
)

// TestMain provides BOOTFLEET_TEST_PG when it is unset (see
// testutil.PostgresMain), for the tests of two servers on one store.
func TestMain(m *testing.M) { os.Exit(testutil.PostgresMain(m)) }
