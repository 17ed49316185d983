package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStormCPUProfile: a storm that fails at once (no such interface)
// still leaves a whole CPU profile behind, as a failed storm of hundreds
// of machines must.
func TestStormCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	out := run(t, "storm", "-i", "bf-none0", "--cpu-profile", path)
	if !strings.Contains(out, "error: interface bf-none0") {
		t.Errorf("storm on a missing interface printed %q, want its error", out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	strs, err := profileStrings(raw)
	if err != nil {
		t.Fatalf("%s is not a profile: %v", path, err)
	}
	for _, want := range []string{"cpu", "nanoseconds"} {
		if !slices.Contains(strs, want) {
			t.Errorf("profile's strings %q lack %q", strs, want)
		}
	}

	out = run(t, "storm", "--real", "lab", "--cpu-profile", path)
	if !strings.Contains(out, "error: --cpu-profile profiles the emulated machines") {
		t.Errorf("storm --real --cpu-profile printed %q, want a refusal", out)
	}
}

// profileStrings reads the string table (field 6) of a gzipped
// profile.proto, walking its top-level fields: enough to tell a profile
// from anything else without the pprof module in the product's go.mod.
func profileStrings(raw []byte) ([]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("want gzip: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("want gzip: %w", err)
	}
	var strs []string
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("bad field key at %d bytes from the end", len(b))
		}
		b = b[n:]
		switch key & 7 {
		case 0: // varint
			if _, n = binary.Uvarint(b); n <= 0 {
				return nil, fmt.Errorf("field %d: bad varint", key>>3)
			}
			b = b[n:]
		case 2: // length-delimited
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return nil, fmt.Errorf("field %d: length %d past the end", key>>3, l)
			}
			if key>>3 == 6 {
				strs = append(strs, string(b[n:n+int(l)]))
			}
			b = b[n+int(l):]
		default:
			return nil, fmt.Errorf("field %d: wire type %d, want 0 or 2 as runtime/pprof writes", key>>3, key&7)
		}
	}
	if len(strs) == 0 {
		return nil, fmt.Errorf("no string table")
	}
	return strs, nil
}
