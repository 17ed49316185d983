package storm

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// cpuComponent is a part of the simulator's work as the report names it,
// and the function names (substrings) whose frames are that work.
type cpuComponent struct {
	name  string
	funcs []string
}

// cpuComponents are tried on each sample's frames from the leaf upward:
// the first frame that one of them names decides, so a memmove is charged
// to the cache read that called it, and a request sent while the Hub
// delivered a datagram to the Receiver that sent it. Within one frame the
// order of this list decides.
var cpuComponents = []cpuComponent{
	{"asking the server (mcast.Receiver's requests)", []string{
		"/internal/mcast.(*Receiver).send", "/internal/mcast.(*Receiver).want", "/internal/mcast.(*Receiver).askDeferred"}},
	{"socket backlog checks (mcast.unreadBytes)", []string{"/internal/mcast.unreadBytes"}},
	{"copying cached bytes to the reads (MemCache.ReadAt, rootproxy ReadSpan)", []string{
		"/internal/mcast.(*MemCache).ReadAt", "/internal/rootproxy.(*Proxy).ReadSpan", "/internal/rootproxy.(*Proxy).ReadNow"}},
	{"receiving the group (mcast.Hub, Receivers)", []string{"/internal/mcast.(*Hub)"}},
	{"the root by unicast NBD (rootproxy.Upstream)", []string{"/internal/rootproxy.(*Upstream)"}},
	// What the replay of the trace does itself, once the proxy's reads
	// above have taken theirs: its buffers, its goroutines, its waits.
	{"replaying the root's reads (storm replayExport)", []string{
		"/internal/storm.replayExport", "/internal/storm.proxyRoot", "/internal/storm.nbdReplay"}},
	{"kernel and initrd by MTFTP (storm mtftp)", []string{
		"/internal/storm.(*mtftp", "/internal/storm.mtftp", "/internal/storm.parseMTFTP", "/internal/storm.plainTFTP"}},
	{"ipxe.efi by TFTP (internal/tftp)", []string{"/internal/tftp."}},
	{"DHCP", []string{"/internal/storm.dora", "/internal/storm.(*dhcpConn)", "/insomniacslk/dhcp/"}},
	{"HTTP (net/http)", []string{"net/http.", "/internal/storm.(*fetcher)"}},
	{"Go runtime: GC", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge",
		"runtime.gcAssistAlloc", "runtime.gcDrain", "runtime.gcStart", "runtime.markroot"}},
	{"Go runtime: scheduler", []string{"runtime.mstart", "runtime.mcall", "runtime.schedule", "runtime.findRunnable",
		"runtime.sysmon", "runtime.park_m", "runtime.goexit0", "runtime.morestack"}},
}

// otherCPU is the component of samples no frame of which cpuComponents
// names.
const otherCPU = "other"

// cpuShare is the CPU seconds one component took in a profile.
type cpuShare struct {
	Name    string
	Seconds float64
}

// componentOf is the name of the component sample s is charged to.
func componentOf(s *profile.Sample) string {
	for _, loc := range s.Location { // leaf first
		for _, l := range loc.Line { // inlined callees before their callers
			if l.Function == nil {
				continue
			}
			for _, c := range cpuComponents {
				for _, f := range c.funcs {
					if strings.Contains(l.Function.Name, f) {
						return c.name
					}
				}
			}
		}
	}
	return otherCPU
}

// classify sums the CPU seconds of p's samples by component, in the order
// of cpuComponents with other last, leaving out components without any.
func classify(p *profile.Profile) ([]cpuShare, error) {
	i := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if i < 0 || p.SampleType[i].Unit != "nanoseconds" {
		var got []string
		for _, t := range p.SampleType {
			got = append(got, t.Type+"/"+t.Unit)
		}
		return nil, fmt.Errorf("profile has sample types %v, want cpu/nanoseconds (a CPU profile)", got)
	}
	ns := map[string]int64{}
	for _, s := range p.Sample {
		ns[componentOf(s)] += s.Value[i]
	}
	var out []cpuShare
	for _, c := range append(slices.Clone(cpuComponents), cpuComponent{name: otherCPU}) {
		if v := ns[c.name]; v > 0 {
			out = append(out, cpuShare{c.name, float64(v) / 1e9})
		}
	}
	return out, nil
}

// readCPUProfile classifies the CPU profile in path.
func readCPUProfile(path string) ([]cpuShare, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: want a pprof profile: %w", path, err)
	}
	shares, err := classify(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return shares, nil
}

// cpuBusy is the share of the CPU time the host's CPUs had in x's wall
// that the server and the simulator used together: near 1, the storm was
// bound by this machine's CPUs.
func (r *report) cpuBusy(x *row) float64 {
	if r.Host.CPUs <= 0 || math.IsNaN(x.wall) || x.wall <= 0 {
		return math.NaN()
	}
	return (x.serverCPU + x.clientCP) / (float64(r.Host.CPUs) * x.wall)
}

// A storm was bound by the CPUs when the server and the simulator used
// cpuBound of the CPU time the CPUs had, or the machine was busy
// machineBound of it: the processes' share leaves out the kernel's packet
// work in softirq, charged to no process.
const (
	cpuBound     = 0.85
	machineBound = 0.90
)

// renderCPU writes where the simulator's CPU went in the multicast storm
// at the largest N, from the CPU profile of its median run.
func (r *report) renderCPU(p func(string, ...any)) {
	fw, top := r.Opts.firmwares[0], r.Opts.clients[len(r.Opts.clients)-1]
	m, x := r.row(stackMulticast, fw, top), r.medianRun(stackMulticast, fw, top)
	if m == nil || x == nil {
		return
	}
	p("## Where the simulator's CPU went\n\n")
	if busy := r.cpuBusy(m); !math.IsNaN(busy) {
		p("In the %s storm of %d %s machines the server used %s of CPU and the simulator %s in a wall of %s: ",
			stackMulticast, top, fw, secs(m.serverCPU), secs(m.clientCP), secs(m.wall))
		p("%.0f%% of the %.1f CPU-seconds this machine's %d CPUs had in that time. ", 100*busy, float64(r.Host.CPUs)*m.wall, r.Host.CPUs)
		if m.machineBusy > 0 {
			p("The machine as a whole, the kernel's packet work in softirq included, was busy %.0f%% of it. ", 100*m.machineBusy)
		}
		if busy >= cpuBound || m.machineBusy >= machineBound {
			p("**The storm was bound by this machine's CPUs**, not by the server's link: ")
			p("%d CPUs cannot play %d machines at the link's pace, and its × limit measures the simulator on them.\n\n", r.Host.CPUs, top)
		} else {
			p("The CPUs had time to spare, so they alone do not explain how far the storm is from its limit.\n\n")
		}
	}
	if x.CPUErr != "" {
		p("The simulator's CPU profile could not be read: %s.\n\n", x.CPUErr)
		return
	}
	if len(x.CPU) == 0 {
		return
	}
	var total float64
	for _, s := range x.CPU {
		total += s.Seconds
	}
	which := fmt.Sprintf("the median run (run %d of %d)", x.Run, len(m.runs))
	if len(m.runs) == 1 {
		which = "its only run"
	}
	p("The simulator ran with `--cpu-profile` (Go's CPU profiler, 100 samples a second; its cost is in the figures above), ")
	p("and this is the profile of %s: %s of CPU (of the %s the simulator's rusage counts) by component. Each sample goes to the first of its frames, ",
		which, secs(total), secs(x.ClientCPU))
	p("from the innermost outward, that names one (a copy goes to the cache read that asked for it, a request to the ")
	p("Receiver that sent it). **other** is what none names. The profile stays beside the report (%s, not committed; ", x.CPUProfile)
	p("`go tool pprof -top FILE` reads it).\n\n")
	p("| component | CPU | share |\n|---|---:|---:|\n")
	for _, s := range x.CPU {
		p("| %s | %.2f s | %.0f%% |\n", s.Name, s.Seconds, 100*s.Seconds/total)
	}
	p("\n")
}
