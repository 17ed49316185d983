package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bootfleet/bootfleet/internal/storm"
)

// TestStormDesktopTrace: `bootfleet storm --trace` replays the committed
// desktop trace (internal/storm/testdata/desktop.trace, recorded by
// TestRecordDesktopTrace): two emulated machines each read all its bytes
// from bootfleet's NBD server and boot.
func TestStormDesktopTrace(t *testing.T) {
	s := newStormLAN(t)
	path := filepath.Join(s.e.repo, "internal", "storm", "testdata", "desktop.trace")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := storm.ParseTrace(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rep, err := s.run(t, "--firmware", "ipxe", "-n", "2", "--mac-prefix", "02:bf:d1", "--trace", path)
	if err != nil {
		t.Errorf("storm exited with %v", err)
	}
	if len(rep.Machines) != 2 || rep.Summary.Booted != 2 {
		t.Fatalf("%d machines, %d booted, %d failed; want 2 booted: %+v", len(rep.Machines), rep.Summary.Booted, rep.Summary.Failed, rep.Summary.Failures)
	}
	for _, m := range rep.Machines {
		if m.Phases.NBD == nil || m.Phases.NBD.Bytes != tr.Bytes() {
			t.Errorf("%s: nbd phase %+v: want the desktop trace's %d bytes", m.MAC, m.Phases.NBD, tr.Bytes())
		}
	}
	t.Logf("2 machines replayed %d reads, %d bytes each: boot p50 %.2fs max %.2fs, %d bytes in %.2fs",
		len(tr.Reads), tr.Bytes(), rep.Summary.Phases["boot"].P50, rep.Summary.Phases["boot"].Max, rep.Summary.Bytes, rep.Summary.WallSeconds)
}
