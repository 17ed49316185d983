package nbddurability

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	imageSize = 8 << 20
	sector    = 4 << 10 // granularity of the "old or new, never garbage" checks
	kib       = 1 << 10
	mib       = 1 << 20
)

// region is a range the client wrote with one byte pattern.
type region struct {
	off, n int64
	pat    byte
}

// TestFlushedWritesSurviveKill9 is the overlays' durability proof. Lifetime 1
// writes patterns with FLUSH, with FUA only, and over flushed blocks, and
// is killed with SIGKILL the moment qemu-io reports the last of them done,
// while the session is still open (a clean disconnect would flush on
// close and hide a missing flush). Lifetime 2 must read every pattern back
// and the base everywhere else. It then releases a flushed block
// (WRITE_ZEROES with unmap) and writes a fresh block, neither flushed, and
// is killed again: lifetime 3 must see the released block as its flushed
// pattern or zeroes, never the fresh block's data, which would mean the
// slot the on-disk map still points at was reused before a Flush.
//
// What it cannot prove: SIGKILL keeps the kernel's page cache, so a Flush
// that wrote the map but skipped fsync would pass (checked: removing both
// Sync calls from blockstore's Flush does not fail it). That half rests on
// blockstore's Flush ordering and its unit tests. What it does catch:
// a Flush that does not write the map, a server that ignores FUA, and
// slot reuse before the map on disk has dropped the slot.
func TestFlushedWritesSurviveKill9(t *testing.T) {
	prereqs(t)
	const mac = "52:54:00:bf:d0:01"
	dir := t.TempDir()
	s := newServer(t, dir)
	s.start()
	base := s.importImage("durable")
	s.cli("machine", "add", "--mac", mac, "--profile", "durable")

	// Lifetime 1.
	q := openQemuIO(t, s.export(mac))
	durable := []region{
		{0, 64 * kib, 0x11},                // one whole block
		{100 * kib, 300 * kib, 0x12},       // unaligned, across blocks
		{4 * mib, 64 * kib, 0x41},          // released in lifetime 2
		{6*mib - 512, 8 * kib, 0x14},       // straddles a block edge
		{1 * mib, 4 * kib, 0x21},           // FUA, no FLUSH after it
		{2*mib + 512, 70 * kib, 0x22},      // FUA, no FLUSH
		{8 * kib, 4 * kib, 0x31},           // over a flushed block, then FLUSH
		{imageSize - 4*kib, 4 * kib, 0x3e}, // the last sector
	}
	for _, r := range durable[:4] {
		q.mustWrite("", r)
	}
	q.mustRun("flush")
	q.mustWrite("", durable[6])
	q.mustWrite("", durable[7])
	q.mustRun("flush")
	// FUA last: a FLUSH after them would cover a server that ignores FUA.
	for _, r := range durable[4:6] {
		q.mustWrite("-f", r)
	}
	s.Kill9()
	q.close()

	// Lifetime 2: everything flushed is there, the base everywhere else.
	s.start()
	want := apply(base, durable)
	got := s.readAll(mac)
	compare(t, "after SIGKILL #1", got, want, nil)

	// Release the 0x41 block and write a fresh one, nothing flushed.
	q = openQemuIO(t, s.export(mac))
	q.mustRun("write -z -u 4M 64k")
	fresh := []region{{5 * mib, 64 * kib, 0x42}, {5*mib + 64*kib, 64 * kib, 0x43}}
	for _, r := range fresh {
		q.mustWrite("", r)
	}
	s.Kill9()
	q.close()

	// Lifetime 3: the unflushed changes may or may not be there, but each
	// sector holds its old or its new content, nothing else.
	s.start()
	got = s.readAll(mac)
	zeroed := region{4 * mib, 64 * kib, 0}
	compare(t, "after SIGKILL #2", got, want, append(fresh, zeroed))
	if t.Failed() {
		t.Log(s.LogTail(40))
	}
}

// TestFullDiskGetsENOSPC puts one machine's overlay directory on a 1 MiB
// tmpfs and writes 6 MiB into it: the write must fail with ENOSPC at the
// client, the server must log it naming the machine and keep serving, and
// the overlay must read back as before the failure plus, sector by sector,
// either the base or the failed write's data; also after a kill -9.
func TestFullDiskGetsENOSPC(t *testing.T) {
	prereqs(t)
	const mac = "52:54:00:bf:d0:02"
	dir := t.TempDir()
	s := newServer(t, dir)
	ovl := filepath.Join(s.data, "overlays", strings.ReplaceAll(mac, ":", "-"))
	mountTmpfs(t, ovl, "1m") // before start: the server dies before the unmount
	s.start()
	base := s.importImage("durable")
	s.cli("machine", "add", "--mac", mac, "--profile", "durable")

	q := openQemuIO(t, s.export(mac))
	before := []region{{0, 128 * kib, 0x61}}
	q.mustWrite("", before[0])
	q.mustRun("flush")
	failed := region{1 * mib, 6 * mib, 0x62}
	out := q.run(fmt.Sprintf("write -P 0x%02x %d %d", failed.pat, failed.off, failed.n))
	if !strings.Contains(out, "write failed: No space left on device") {
		t.Fatalf("writing 6 MiB into a 1 MiB overlay: qemu-io said %q, want \"write failed: No space left on device\"\n%s", out, s.LogTail(40))
	}
	// Blocks the overlay already holds take writes without new space.
	after := region{4 * kib, 4 * kib, 0x63}
	q.mustWrite("", after)
	q.mustRun("flush")
	q.close()

	if !s.alive() {
		t.Fatalf("server exited after ENOSPC:\n%s", s.LogTail(40))
	}
	enospc := regexp.MustCompile(`(?i)(ENOSPC|no space left)`)
	logged := false
	for _, l := range strings.Split(s.LogText(), "\n") {
		if enospc.MatchString(l) && (strings.Contains(l, mac) || strings.Contains(l, strings.ReplaceAll(mac, ":", "-"))) {
			logged = true
			t.Logf("server logged: %s", l)
			break
		}
	}
	if !logged {
		t.Errorf("no log line names ENOSPC and machine %s:\n%s", mac, s.LogTail(40))
	}

	want := apply(base, append(before, after))
	compare(t, "fresh session after ENOSPC", s.readAll(mac), want, []region{failed})
	q = openQemuIO(t, s.export(mac))
	last := region{8 * kib, 4 * kib, 0x64}
	q.mustWrite("", last)
	q.mustRun("flush")
	q.close()
	want = apply(want, []region{last})

	s.Kill9()
	s.start()
	compare(t, "after ENOSPC and SIGKILL", s.readAll(mac), want, []region{failed})
	if t.Failed() {
		t.Log(s.LogTail(40))
	}
}

// apply returns a copy of img with the regions written.
func apply(img []byte, rs []region) []byte {
	out := bytes.Clone(img)
	for _, r := range rs {
		for i := r.off; i < r.off+r.n; i++ {
			out[i] = r.pat
		}
	}
	return out
}

// compare wants got == want, except that a sector overlapping a region in
// maybe may also hold that region's content there (an unflushed or failed
// write: old or new, never anything else).
func compare(t *testing.T, when string, got, want []byte, maybe []region) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: read %d bytes, want %d", when, len(got), len(want))
	}
	bad := 0
	for s := int64(0); s < int64(len(want)); s += sector {
		g, w := got[s:s+sector], want[s:s+sector]
		if bytes.Equal(g, w) {
			continue
		}
		alt := apply(want[s:s+sector], shift(maybe, s))
		if len(maybe) > 0 && bytes.Equal(g, alt) {
			continue
		}
		if bad++; bad <= 10 {
			i := 0
			for i < len(g) && g[i] == w[i] {
				i++
			}
			t.Errorf("%s: sector at %d (%d MiB + %d KiB) differs from byte %d: got %#02x, want %#02x%s",
				when, s, s/mib, s%mib/kib, i, g[i], w[i], altNote(maybe, alt, i))
		}
	}
	if bad > 10 {
		t.Errorf("%s: ... %d bad sectors in all", when, bad)
	}
}

func altNote(maybe []region, alt []byte, i int) string {
	if len(maybe) == 0 {
		return ""
	}
	return fmt.Sprintf(" (or %#02x)", alt[i])
}

// shift makes regions relative to a sector at s, clipped to it.
func shift(rs []region, s int64) []region {
	var out []region
	for _, r := range rs {
		lo, hi := max(r.off, s), min(r.off+r.n, s+sector)
		if lo < hi {
			out = append(out, region{lo - s, hi - lo, r.pat})
		}
	}
	return out
}
