package storm

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/bootfleet/bootfleet/internal/storm"
)

// fakeProfile is a CPU profile whose samples have the given stacks (leaf
// first, each frame a function name) and CPU milliseconds.
func fakeProfile(stacks [][]string, ms []int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10e6,
	}
	funcs := map[string]*profile.Function{}
	for i, st := range stacks {
		s := &profile.Sample{Value: []int64{ms[i] / 10, ms[i] * 1e6}}
		for _, name := range st {
			f := funcs[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

const mod = "github.com/bootfleet/bootfleet"

func TestClassify(t *testing.T) {
	p := fakeProfile([][]string{
		// A copy charged to the cache read that asked for it, not to the
		// Hub or the proxy further up.
		{"runtime.memmove", mod + "/internal/mcast.(*MemCache).ReadAt", mod + "/internal/rootproxy.(*Proxy).ReadSpan"},
		// A request sent while the Hub delivered: the request.
		{"internal/runtime/syscall.Syscall6", "syscall.sendto", mod + "/internal/mcast.(*Receiver).send", mod + "/internal/mcast.(*Hub).Run"},
		{"runtime.memclrNoHeapPointers", mod + "/internal/mcast.(*Hub).Run"},
		{"internal/runtime/syscall.Syscall6", mod + "/internal/mcast.unreadBytes"},
		{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"},
		{"runtime.futex", "runtime.findRunnable", "runtime.schedule", "runtime.mcall"},
		{"crypto/sha256.block", "main.somethingElse"},
		{"runtime.memmove", mod + "/internal/tftp.Get"},
		// The replay's own allocation, under no read of the proxy.
		{"runtime.mallocgc", "runtime.makeslice", mod + "/internal/storm.replayExport.func1"},
	}, []int64{300, 200, 100, 70, 90, 60, 10, 20, 30})
	got, err := classify(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []cpuShare{
		{cpuComponents[0].name, 0.2}, {cpuComponents[1].name, 0.07}, {cpuComponents[2].name, 0.3}, {cpuComponents[3].name, 0.1},
		{cpuComponents[5].name, 0.03}, {cpuComponents[7].name, 0.02}, {"Go runtime: GC", 0.09}, {"Go runtime: scheduler", 0.06}, {otherCPU, 0.01},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("classify =\n%v\nwant\n%v", got, want)
	}
}

// TestClassifyInlined: the innermost of a location's inlined functions
// decides before the function it was inlined into.
func TestClassifyInlined(t *testing.T) {
	p := fakeProfile([][]string{{mod + "/internal/mcast.(*Hub).Run"}}, []int64{10})
	p.Location[0].Line = append([]profile.Line{{Function: &profile.Function{ID: 9, Name: mod + "/internal/mcast.unreadBytes"}}}, p.Location[0].Line...)
	if got, _ := classify(p); len(got) != 1 || got[0].Name != cpuComponents[1].name {
		t.Errorf("classify = %v, want all in %q", got, cpuComponents[1].name)
	}
}

func TestClassifyNotCPU(t *testing.T) {
	p := fakeProfile(nil, nil)
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}
	if _, err := classify(p); err == nil || !strings.Contains(err.Error(), "want cpu/nanoseconds") {
		t.Errorf("classify of a heap profile: %v, want a refusal", err)
	}
}

// TestReadCPUProfile reads a profile written as the simulator's is.
func TestReadCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	p := fakeProfile([][]string{{"net/http.(*conn).serve"}}, []int64{40})
	if err := writeProfile(p, path); err != nil {
		t.Fatal(err)
	}
	got, err := readCPUProfile(path)
	if err != nil || len(got) != 1 || got[0].Name != "HTTP (net/http)" || math.Abs(got[0].Seconds-0.04) > 1e-9 {
		t.Errorf("readCPUProfile = %v, %v; want 0.04 s of HTTP", got, err)
	}
	if _, err := readCPUProfile(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("readCPUProfile of a missing file succeeded")
	}
}

// TestRenderCPU: the section, its verdict on the CPUs and the reason
// beside the missed 1.15× target.
func TestRenderCPU(t *testing.T) {
	r := fixture()
	r.Opts.stacks = []string{"bootfleet", "bootfleet-multicast"}
	r.Runs = append(r.Runs, run{Stack: stackMulticast, Firmware: "uefi", N: 200, Run: 1, ServerCPU: 70, ClientCPU: 120, MachineBusy: 0.97,
		Report:     rep200(100), // past 1.15× its limit of 73.6 s
		CPUProfile: "BENCHMARKS-storm-cpu/bootfleet-multicast-uefi-200-run1.pprof",
		CPU:        []cpuShare{{cpuComponents[2].name, 1.8}, {"Go runtime: GC", 0.6}, {otherCPU, 0.1}}})
	got := r.render()
	reportHas(t, got,
		"## Where the simulator's CPU went",
		"the server used 70.0 s of CPU and the simulator 120.0 s in a wall of 100.0 s: 95% of the 200.0 CPU-seconds this machine's 2 CPUs had in that time. The machine as a whole, the kernel's packet work in softirq included, was busy 97% of it. **The storm was bound by this machine's CPUs**",
		"this is the profile of its only run: 2.5 s of CPU (of the 120.0 s the simulator's rusage counts) by component",
		"| "+cpuComponents[2].name+" | 1.80 s | 72% |",
		"| Go runtime: GC | 0.60 s | 24% |",
		"| other | 0.10 s | 4% |",
		"; the storm used 95% of the CPU time the 2 CPUs had in its wall | **not met** |",
		"--cpu-profile BENCHMARKS-storm-cpu/bootfleet-multicast-uefi-200-runR.pprof",
	)
	// The processes short of the CPUs, the machine not: softirq took the
	// rest, and the storm was still bound by the CPUs.
	r.Runs[len(r.Runs)-1].ClientCPU = 90
	reportHas(t, r.render(), "80% of the 200.0 CPU-seconds", "busy 97% of it. **The storm was bound by this machine's CPUs**")
	r.Runs[len(r.Runs)-1].ClientCPU, r.Runs[len(r.Runs)-1].MachineBusy = 30, 0.55
	reportHas(t, r.render(), "50% of the 200.0 CPU-seconds", "busy 55% of it. The CPUs had time to spare")
	r.Runs[len(r.Runs)-1].Report.Summary.WallSeconds = 50 // within 1.15× the limit
	if got = r.render(); strings.Contains(got, "the storm used") {
		t.Errorf("a met target still says how much CPU the storm used:\n%s", got)
	}
}

// rep200 is a report of 200 machines that all booted in wall seconds.
func rep200(wall float64) *storm.Report {
	return &storm.Report{Clients: 200, Summary: storm.Summary{Booted: 200, WallSeconds: wall,
		Phases: map[string]storm.Stats{"boot": {Count: 200, P50: wall / 2, P99: wall}}}}
}

// writeProfile writes p to path as runtime/pprof does: gzipped.
func writeProfile(p *profile.Profile, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
