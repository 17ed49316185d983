package storm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseTrace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *Trace
		wantErr bool
	}{
		{"reads and size", "bootfleet-trace 1\n# from a test\nsize 1048576\n0 4096\n\n8192 131072 # readahead\n",
			&Trace{Size: 1 << 20, Reads: []Read{{0, 4096}, {8192, 131072}}}, false},
		{"no reads", "bootfleet-trace 1\n", &Trace{}, false},
		{"wrong magic", "bootfleet-trace 2\n0 1\n", nil, true},
		{"empty", "", nil, true},
		{"zero length", "bootfleet-trace 1\n0 0\n", nil, true},
		{"length too big", "bootfleet-trace 1\n0 33554433\n", nil, true},
		{"three fields", "bootfleet-trace 1\n0 1 2\n", nil, true},
		{"negative offset", "bootfleet-trace 1\n-1 512\n", nil, true},
		{"hex offset", "bootfleet-trace 1\n0x10 512\n", nil, true},
		{"bad size", "bootfleet-trace 1\nsize big\n", nil, true},
		{"long line", "bootfleet-trace 1\n" + strings.Repeat("1", 5000) + " 1\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrace(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrTrace) {
				t.Fatalf("err = %v, want it to wrap ErrTrace", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWriteTraceRoundTrip(t *testing.T) {
	in := &Trace{Size: 4 << 30, Reads: []Read{{0, 512}, {1 << 40, 32 << 20}, {4096, 4096}}}
	var b bytes.Buffer
	if err := WriteTrace(&b, in, "recorded by a test", "two\nlines"); err != nil {
		t.Fatal(err)
	}
	out, err := ParseTrace(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
	if in.Bytes() != 512+32<<20+4096 {
		t.Fatalf("Bytes = %d", in.Bytes())
	}
}

func TestReadFit(t *testing.T) {
	tests := []struct {
		name string
		r    Read
		size uint64
		want Read
		ok   bool
	}{
		{"inside", Read{4096, 4096}, 1 << 20, Read{4096, 4096}, true},
		{"ends at the end", Read{1<<20 - 4096, 4096}, 1 << 20, Read{1<<20 - 4096, 4096}, true},
		{"past the end wraps aligned", Read{3<<20 + 12345, 65536}, 1 << 20, Read{(3<<20 + 12345) % (1<<20 - 65536 + 1) &^ 4095, 65536}, true},
		{"larger than the export", Read{0, 8192}, 4096, Read{0, 8192}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.r.Fit(tt.size)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("Fit = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
			if ok && got.Offset+uint64(got.Length) > tt.size {
				t.Fatalf("%+v passes the end of %d", got, tt.size)
			}
		})
	}
}

// TestDefaultTrace keeps the committed trace parseable and non-trivial.
func TestDefaultTrace(t *testing.T) {
	tr := DefaultTrace()
	if len(tr.Reads) < 100 || tr.Bytes() < 1<<20 {
		t.Fatalf("committed trace has %d reads, %d bytes; want a real boot's (hundreds of reads, MiBs)", len(tr.Reads), tr.Bytes())
	}
}

// TestCommittedTraces parses every testdata/*.trace and holds it to its
// header: the reads and bytes storm record counted (its "N sessions, R
// reads, B bytes" comment) and the export size every read must fit in.
// The least each must read keeps a trace from being cut short unseen.
func TestCommittedTraces(t *testing.T) {
	least := map[string]int64{
		"debian12.trace": 40 << 20,  // a stock Debian 12 to multi-user
		"desktop.trace":  300 << 20, // issue 31: the storm benchmark's desktop boot
	}
	paths, err := filepath.Glob(filepath.Join("testdata", "*.trace"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := ParseTrace(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			reads, total, ok := recordedTotals(b)
			if !ok {
				t.Fatalf("no \"# N sessions, R reads, B bytes\" comment from storm record")
			}
			if int64(len(tr.Reads)) != reads || tr.Bytes() != total {
				t.Errorf("parsed %d reads, %d bytes; the header says %d reads, %d bytes", len(tr.Reads), tr.Bytes(), reads, total)
			}
			if tr.Size == 0 {
				t.Errorf("no size line: want the export's size as recorded")
			}
			for i, r := range tr.Reads {
				if r.Offset+uint64(r.Length) > tr.Size {
					t.Fatalf("read %d: %d+%d ends past the export's %d bytes", i, r.Offset, r.Length, tr.Size)
				}
			}
			if want, known := least[name]; !known {
				t.Errorf("no least size for %s: add it to this test's table", name)
			} else if tr.Bytes() < want {
				t.Errorf("reads %d bytes, want at least %d", tr.Bytes(), want)
			}
		})
	}
	if len(paths) < len(least) {
		t.Errorf("found %d traces in testdata (%v), want the %d this test knows", len(paths), paths, len(least))
	}
}

// recordedTotals finds storm record's "# N sessions, R reads, B bytes"
// comment in a trace's header.
func recordedTotals(trace []byte) (reads, total int64, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(trace))
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "size ") {
		var sessions int
		if n, _ := fmt.Sscanf(sc.Text(), "# %d sessions, %d reads, %d bytes", &sessions, &reads, &total); n == 3 {
			return reads, total, true
		}
	}
	return 0, 0, false
}

func FuzzParseTrace(f *testing.F) {
	f.Add("bootfleet-trace 1\nsize 1048576\n0 4096\n8192 131072\n")
	f.Add("bootfleet-trace 1\n# c\n\n")
	f.Add(defaultTrace[:min(len(defaultTrace), 2000)])
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTrace(strings.NewReader(s))
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := WriteTrace(&b, tr); err != nil {
			t.Fatal(err)
		}
		again, err := ParseTrace(&b)
		if err != nil {
			t.Fatalf("re-parse of written trace: %v", err)
		}
		if !reflect.DeepEqual(tr.Reads, again.Reads) || tr.Size != again.Size {
			t.Fatal("write and parse changed the trace")
		}
	})
}
