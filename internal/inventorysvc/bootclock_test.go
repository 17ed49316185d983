package inventorysvc

import (
	"context"
	"testing"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestBootCompleteMarksBooted: a completed boot sets the machine's state
// and adds no event, since the boot record (package telemetry) already
// holds the completion.
func TestBootCompleteMarksBooted(t *testing.T) {
	c := fileConfig(t, invYAML)
	st := openStore(t, c.Data)
	defer st.Close()
	svc := newService(t, st, c)
	ctx := context.Background()
	known := mac("52:54:00:00:00:01")
	svc.markBooted(known)
	m, err := st.GetMachine(ctx, known)
	if err != nil || m.State != inventory.StateBooted {
		t.Fatalf("machine after boot complete: %+v, %v; want state booted", m, err)
	}
	es, err := st.ListEvents(ctx, inventory.EventFilter{MAC: known})
	if err != nil || len(es) != 0 {
		t.Fatalf("events after boot complete: %+v, %v; want none", es, err)
	}
}
