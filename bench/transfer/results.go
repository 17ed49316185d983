package transfer

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// Results is everything one bench invocation measured. It is saved as JSON
// beside the plots so the report can be re-rendered (-render) without
// measuring again.
type Results struct {
	Started  string   `json:"started"`
	Seconds  float64  `json:"seconds"`
	Host     []string `json:"host"`     // machine facts: CPU, kernel, load
	Settings []string `json:"settings"` // runs, sizes
	Rate     string   // tbf rate, tc syntax
	RateBps  float64
	Shaping  []string // the tc commands of the shaped link
	Clients  int      // concurrent clients in cases 2, 3 and 5
	NumCPU   int
	// OtherBefore is the share of the machine's CPU busy before bench started.
	OtherBefore float64
	LossRule    string // the nft ruleset of case 4, with N for the percentage
	Servers     []ServerInfo
	Probes      []Probe
	Meas        []*Measurement
	Notes       []string // anything odd seen while measuring
	Complete    bool     // false when interrupted or timed out
}

// ServerInfo is one server as it was run.
type ServerInfo struct {
	Name    string
	Version string
	Cmds    []string // exact command lines, one per topology it ran in
	Skipped string   // why it was not measured, if it was not
}

// Probe records the options a server granted in its OACK for a request.
type Probe struct {
	Server     string
	Blksize    int // requested
	Windowsize int // requested; 1 means the option was not sent
	OACK       string
	GotBlksize int // 0: option not acknowledged (server uses 512 or ignores)
	GotWindow  int // 0: option not acknowledged (lockstep)
}

// Measurement is one figure: a server, a case and a configuration, repeated
// Runs times.
type Measurement struct {
	Case      int
	Topo      string // "shaped" or "loopback"
	Label     string // configuration, e.g. "blksize 1456 windowsize 16"
	Server    string
	Clients   int
	Bytes     int64   // payload bytes per run, all clients together
	LimitSec  float64 // physical lower bound for one run; 0 when none applies
	Runs      []Run
	SameAs    string // label of an identical figure (server ignored an option)
	Note      string
	ServerCmd string
	ClientCmd string

	done  bool    // no more runs: timed out, or its time budget is spent
	spent float64 // seconds of runs so far
}

// Run is one repetition.
type Run struct {
	Sec       float64   // wall time until every client finished
	OK        bool      // every client got a byte-identical file in time
	Err       string    `json:",omitempty"`
	Failed    int       `json:",omitempty"` // clients with a wrong or missing file
	TimedOut  int       `json:",omitempty"` // clients killed at the deadline
	ServerCPU float64   // seconds of CPU used by the server's process tree
	ClientCPU float64   // seconds used by the atftp/curl processes
	HashCPU   float64   // seconds used by bench itself (mostly sha256)
	Busy      float64   // fraction of the whole machine's CPU that was busy
	IRQCPU    float64   // irq+softirq seconds: mostly packet processing, charged to no process
	OtherCPU  float64   // remaining busy CPU seconds: other work on the machine, kernel threads
	PerClient []float64 `json:",omitempty"` // per-client seconds, multi-client runs
}

func (m *Measurement) okRuns() []Run {
	var ok []Run
	for _, r := range m.Runs {
		if r.OK {
			ok = append(ok, r)
		}
	}
	return ok
}

// Sec is the median wall time of the successful runs; NaN if none succeeded.
func (m *Measurement) Sec() float64 {
	var xs []float64
	for _, r := range m.okRuns() {
		xs = append(xs, r.Sec)
	}
	return harness.Median(xs)
}

// MBps is payload megabytes (10^6) per second at the median time.
func (m *Measurement) MBps() float64 {
	s := m.Sec()
	if math.IsNaN(s) || s <= 0 {
		return math.NaN()
	}
	return float64(m.Bytes) / s / 1e6
}

// OfLimit is the physical limit divided by the median time (1 = at the limit).
func (m *Measurement) OfLimit() float64 {
	if m.LimitSec <= 0 {
		return math.NaN()
	}
	return m.LimitSec / m.Sec()
}

// CPUPerGB is the median server CPU seconds per 10^9 bytes served.
func (m *Measurement) CPUPerGB() float64 {
	var xs []float64
	for _, r := range m.okRuns() {
		xs = append(xs, r.ServerCPU/(float64(m.Bytes)/1e9))
	}
	return harness.Median(xs)
}

// Failures is "" when every run succeeded, else e.g. "1/3 runs failed: ...".
func (m *Measurement) Failures() string {
	bad, first := 0, ""
	for _, r := range m.Runs {
		if !r.OK {
			bad++
			if first == "" {
				first = r.Err
			}
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%d runs failed (%s)", bad, len(m.Runs), first)
}

// find returns the measurement for case/topo/label/server, or nil.
func (r *Results) find(c int, topo, label, server string) *Measurement {
	for _, m := range r.Meas {
		if m.Case == c && m.Topo == topo && m.Label == label && m.Server == server {
			return m
		}
	}
	return nil
}

func (r *Results) save(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func loadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: want results JSON written by bench: %w", path, err)
	}
	return &r, nil
}
