package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ethernet costs on the wire beyond the IP packet that carry no frame
// header: 4 bytes of FCS, 8 of preamble and 12 of inter-frame gap. tbf is
// given them as "overhead" so that it charges each veth frame (which it sees
// as Ethernet header plus IP) what real Ethernet charges.
const TBFOverhead = 4 + 8 + 12

// Pair describes two namespaces joined by a veth pair. Names are fixed by
// each bench, not per process, so that the commands printed in its report
// are exact; Lock keeps two runs from sharing them.
type Pair struct {
	ServerNS, ClientNS     string
	ServerDev, ClientDev   string
	ServerAddr, ClientAddr string // without prefix length
	PrefixLen              int    // 24 when zero
	MTU                    int    // 1500 when zero
	// Rate, in tc syntax ("1gbit"), shapes both ends with tbf; empty leaves
	// the link unshaped.
	Rate string
	// ServerOnly shapes only what the server sends: the server's link is
	// the bottleneck under study, and its clients stand for many
	// machines, each with a link of its own.
	ServerOnly bool
	// Classes shapes the server's end with HTBArgs rather than tbf: the
	// same rate and queue, with packets whose priority is PaceClass in a
	// class of their own.
	Classes bool
}

// Net is a built topology: where one server and its clients run.
type Net struct {
	Name     string // "shaped", "unshaped" or "loopback"
	ServerNS string
	ClientNS string
	ServerIP string
	ClientIP string
	RateBps  float64 // tbf rate on both veth ends; 0 when unshaped
	MTU      int
	// Commands are the ip and tc commands that built it, for the report.
	Commands []string
	// Shaping are the tc commands alone.
	Shaping []string
}

// Sh runs a short command and returns its error with the output attached,
// so a failing ip, tc or nft says why.
func Sh(ctx context.Context, name string, args ...string) error {
	_, err := Output(ctx, name, args...)
	return err
}

// Output runs a short command (bounded to a minute) and returns its stdout.
func Output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(errb.String()+out.String()))
	}
	return out.String(), nil
}

// TBFArgs are the tc arguments that shape one veth end. burst is half a
// millisecond of line rate (64 KiB at 1 Gbit/s): big enough that tbf's timer,
// not the burst, sets the pace, small enough that no transfer gets a
// noticeable free head start. latency 10ms bounds the queue at rate*10ms
// (1.25 MB at 1 Gbit/s), the order of a real switch port buffer, so bursts
// from hundreds of clients overflow it as they would on real hardware.
func TBFArgs(ns, dev, rate string, rateBps float64) []string {
	burst := max(64*1024, int(rateBps/8*0.0005))
	return []string{"-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
		"burst", fmt.Sprint(burst), "latency", "10ms", "overhead", fmt.Sprint(TBFOverhead)}
}

// PaceClass is the htb class (handle 1:10) that packets marked with
// this priority (SO_PRIORITY, or nft "meta priority set 1:10") go to
// under HTBArgs: a paced flow, such as a multicast, that a real NIC's
// fair queueing (Debian's default fq_codel) or a switch keeps apart from
// the bulk TCP beside it. In one FIFO, as under tbf, hundreds of TCP
// flows filling the queue drop the paced flow's packets first.
const PaceClass = "1:10"

// HTBArgs are the tc commands that shape one veth end to rate with two
// classes, each with the queue TBFArgs allows (10 ms of line rate): 1:10
// for packets whose priority is PaceClass, guaranteed half the rate, and
// 1:20 for everything else, guaranteed the other half; either borrows
// what the other leaves, up to rate. overhead charges Ethernet's costs as
// for tbf; quantum and burst are set so that htb neither warns nor lets
// one class run ahead by more than a few frames.
func HTBArgs(ns, dev, rate string, rateBps float64) [][]string {
	limit := fmt.Sprint(max(64*1024, int(rateBps/8*0.01)))
	half := fmt.Sprintf("%dbit", int64(rateBps/2))
	over := fmt.Sprint(TBFOverhead)
	cls := func(parent, id, r, prio string) []string {
		return []string{"-n", ns, "class", "add", "dev", dev, "parent", parent, "classid", id, "htb", "rate", r, "ceil", rate,
			"burst", "64k", "cburst", "64k", "quantum", "30000", "prio", prio, "overhead", over}
	}
	return [][]string{
		{"-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "20"},
		{"-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate,
			"burst", "64k", "cburst", "64k", "overhead", over},
		cls("1:1", PaceClass, half, "0"),
		cls("1:1", "1:20", half, "1"),
		{"-n", ns, "qdisc", "add", "dev", dev, "parent", PaceClass, "bfifo", "limit", limit},
		{"-n", ns, "qdisc", "add", "dev", dev, "parent", "1:20", "bfifo", "limit", limit},
	}
}

// NewPair builds p's namespaces and veth pair, shaped when p.Rate is set.
// Namespaces of the same names left by a killed run are deleted first.
func NewPair(ctx context.Context, p Pair) (*Net, error) {
	if p.PrefixLen == 0 {
		p.PrefixLen = 24
	}
	if p.MTU == 0 {
		p.MTU = 1500
	}
	n := &Net{Name: "unshaped", ServerNS: p.ServerNS, ClientNS: p.ClientNS,
		ServerIP: p.ServerAddr, ClientIP: p.ClientAddr, MTU: p.MTU}
	DeleteNamespaces(p.ServerNS, p.ClientNS)
	mtu := fmt.Sprint(p.MTU)
	steps := [][]string{
		{"ip", "netns", "add", p.ServerNS},
		{"ip", "netns", "add", p.ClientNS},
		{"ip", "link", "add", p.ServerDev, "netns", p.ServerNS, "mtu", mtu, "type", "veth",
			"peer", "name", p.ClientDev, "netns", p.ClientNS, "mtu", mtu},
		{"ip", "-n", p.ServerNS, "addr", "add", fmt.Sprintf("%s/%d", p.ServerAddr, p.PrefixLen), "dev", p.ServerDev},
		{"ip", "-n", p.ClientNS, "addr", "add", fmt.Sprintf("%s/%d", p.ClientAddr, p.PrefixLen), "dev", p.ClientDev},
		{"ip", "-n", p.ServerNS, "link", "set", "lo", "up"},
		{"ip", "-n", p.ClientNS, "link", "set", "lo", "up"},
		{"ip", "-n", p.ServerNS, "link", "set", p.ServerDev, "up"},
		{"ip", "-n", p.ClientNS, "link", "set", p.ClientDev, "up"},
	}
	if p.Rate != "" {
		bps, err := ParseRate(p.Rate)
		if err != nil {
			return nil, err
		}
		n.Name, n.RateBps = "shaped", bps
		if p.Classes {
			for _, a := range HTBArgs(p.ServerNS, p.ServerDev, p.Rate, bps) {
				steps = append(steps, append([]string{"tc"}, a...))
			}
		} else {
			steps = append(steps, append([]string{"tc"}, TBFArgs(p.ServerNS, p.ServerDev, p.Rate, bps)...))
		}
		if !p.ServerOnly {
			steps = append(steps, append([]string{"tc"}, TBFArgs(p.ClientNS, p.ClientDev, p.Rate, bps)...))
		}
	}
	for _, s := range steps {
		if err := Sh(ctx, s[0], s[1:]...); err != nil {
			n.Close()
			return nil, fmt.Errorf("build namespaces %s and %s: %w", p.ServerNS, p.ClientNS, err)
		}
		n.Commands = append(n.Commands, ShellJoin(s))
		if s[0] == "tc" {
			n.Shaping = append(n.Shaping, ShellJoin(s))
		}
	}
	return n, nil
}

// NewLoopback builds one namespace with only lo up: server and clients share
// it, nothing is shaped, and the CPU is the only limit.
func NewLoopback(ctx context.Context, ns string) (*Net, error) {
	DeleteNamespaces(ns)
	n := &Net{Name: "loopback", ServerNS: ns, ClientNS: ns, ServerIP: "127.0.0.1", ClientIP: "127.0.0.1", MTU: 1500}
	for _, s := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
	} {
		if err := Sh(ctx, s[0], s[1:]...); err != nil {
			n.Close()
			return nil, fmt.Errorf("build loopback namespace %s: %w", ns, err)
		}
		n.Commands = append(n.Commands, ShellJoin(s))
	}
	return n, nil
}

// Close deletes the namespaces (and with them the veth pair and qdiscs),
// killing what still runs in them. It needs no context: cleanup must run
// even after a cancel.
func (n *Net) Close() {
	if n.ClientNS == n.ServerNS {
		DeleteNamespaces(n.ServerNS)
		return
	}
	DeleteNamespaces(n.ServerNS, n.ClientNS)
}

// LossRule is the nftables ruleset that drops pct% of the UDP packets from
// the server's address on the client's ingress: the data direction, where
// loss costs a TFTP transfer the most.
func LossRule(serverIP string, pct int) string {
	return fmt.Sprintf(`table inet bfbench {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr %s meta l4proto udp numgen random mod 100 < %d counter drop
	}
}
`, serverIP, pct)
}

// SetLoss installs LossRule(pct) in the client namespace, replacing any
// earlier one; pct 0 removes it.
func (n *Net) SetLoss(ctx context.Context, pct int) error {
	_ = Sh(ctx, "ip", "netns", "exec", n.ClientNS, "nft", "delete", "table", "inet", "bfbench")
	if pct == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.ClientNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(LossRule(n.ServerIP, pct))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install %d%% loss with nft: %w: %s", pct, err, out)
	}
	return nil
}

// DeleteNamespaces kills what runs in the named namespaces and deletes
// them; names that do not exist are ignored.
func DeleteNamespaces(names ...string) {
	for _, ns := range names {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
}

// Lock takes an exclusive lock on path (under /run) so that two runs of one
// bench do not share its fixed namespace names; closing the file frees it.
func Lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w (benches need root)", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another run holds %s; wait for it to finish: %w", path, err)
	}
	return f, nil
}
