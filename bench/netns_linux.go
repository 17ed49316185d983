package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Namespace names are fixed, not per-PID, so that the commands printed in
// BENCHMARKS.md are exact; a lock file keeps two benches from sharing them
// and cleanupStale removes what a killed run left behind.
const (
	nsServer   = "bf-bench-srv"
	nsClient   = "bf-bench-cli"
	nsLoopback = "bf-bench-lo"
	vethServer = "bfb-srv"
	vethClient = "bfb-cli"
	serverAddr = "10.77.0.1"
	clientAddr = "10.77.0.2"
	linkMTU    = 1500
)

// Topology is where one server and its clients run.
type Topology struct {
	Name     string // "shaped" or "loopback"
	ServerNS string
	ClientNS string
	ServerIP string
	RateBps  float64 // tbf rate on both veth ends; 0 when unshaped
	MTU      int
	Shaping  []string // the tc commands, for the report
}

// sh runs a command and returns its error with the output attached, so a
// failing ip/tc/nft says why.
func sh(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// tbfArgs shapes one veth end. burst is half a millisecond of line rate
// (64 KiB at 1 Gbit/s): big enough that tbf's timer, not the burst, sets the
// pace, small enough that no transfer gets a noticeable free head start.
// latency 10ms bounds the queue at rate*10ms (1.25 MB at 1 Gbit/s), the
// order of a real switch port buffer, so bursts from 200 clients can overflow
// it as they would on real hardware.
func tbfArgs(ns, dev, rate string, rateBps float64) []string {
	burst := max(64*1024, int(rateBps/8*0.0005))
	return []string{"-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
		"burst", fmt.Sprint(burst), "latency", "10ms", "overhead", fmt.Sprint(tbfOverhead)}
}

// newShaped builds server and client namespaces joined by a veth pair with
// tbf at rate on both ends.
func newShaped(ctx context.Context, rate string, rateBps float64) (*Topology, error) {
	t := &Topology{Name: "shaped", ServerNS: nsServer, ClientNS: nsClient, ServerIP: serverAddr, RateBps: rateBps, MTU: linkMTU}
	steps := [][]string{
		{"ip", "netns", "add", nsServer},
		{"ip", "netns", "add", nsClient},
		{"ip", "link", "add", vethServer, "netns", nsServer, "mtu", fmt.Sprint(linkMTU), "type", "veth",
			"peer", "name", vethClient, "netns", nsClient, "mtu", fmt.Sprint(linkMTU)},
		{"ip", "-n", nsServer, "addr", "add", serverAddr + "/24", "dev", vethServer},
		{"ip", "-n", nsClient, "addr", "add", clientAddr + "/24", "dev", vethClient},
		{"ip", "-n", nsServer, "link", "set", "lo", "up"},
		{"ip", "-n", nsClient, "link", "set", "lo", "up"},
		{"ip", "-n", nsServer, "link", "set", vethServer, "up"},
		{"ip", "-n", nsClient, "link", "set", vethClient, "up"},
		append([]string{"tc"}, tbfArgs(nsServer, vethServer, rate, rateBps)...),
		append([]string{"tc"}, tbfArgs(nsClient, vethClient, rate, rateBps)...),
	}
	for _, s := range steps {
		if err := sh(ctx, s[0], s[1:]...); err != nil {
			t.Close()
			return nil, fmt.Errorf("build shaped link: %w", err)
		}
		if s[0] == "tc" {
			t.Shaping = append(t.Shaping, shellJoin(s))
		}
	}
	return t, nil
}

// newLoopback builds one namespace with only lo: server and clients share
// it, nothing is shaped, and the CPU is the only limit.
func newLoopback(ctx context.Context) (*Topology, error) {
	t := &Topology{Name: "loopback", ServerNS: nsLoopback, ClientNS: nsLoopback, ServerIP: "127.0.0.1", MTU: linkMTU}
	for _, s := range [][]string{
		{"ip", "netns", "add", nsLoopback},
		{"ip", "-n", nsLoopback, "link", "set", "lo", "up"},
	} {
		if err := sh(ctx, s[0], s[1:]...); err != nil {
			t.Close()
			return nil, fmt.Errorf("build loopback namespace: %w", err)
		}
	}
	return t, nil
}

// Close deletes the namespaces (and with them the veth pair and qdiscs).
// It uses a fresh context: cleanup must run even after a cancel.
func (t *Topology) Close() {
	for _, ns := range []string{t.ServerNS, t.ClientNS} {
		_ = sh(context.Background(), "ip", "netns", "del", ns)
	}
}

// lossRule is the nftables ruleset that drops pct% of the UDP packets the
// server sends to the client, on the client's ingress: the data direction,
// where loss costs a TFTP transfer the most.
func lossRule(pct int) string {
	return fmt.Sprintf(`table inet bfbench {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr %s meta l4proto udp numgen random mod 100 < %d counter drop
	}
}
`, serverAddr, pct)
}

// setLoss installs lossRule(pct) in the client namespace, replacing any
// earlier one; pct 0 removes it.
func (t *Topology) setLoss(ctx context.Context, pct int) error {
	_ = sh(ctx, "ip", "netns", "exec", t.ClientNS, "nft", "delete", "table", "inet", "bfbench")
	if pct == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", t.ClientNS, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(lossRule(pct))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install %d%% loss with nft: %w: %s", pct, err, out)
	}
	return nil
}

// cleanupStale deletes namespaces a killed earlier run left behind, and
// the servers still running in them. Only bench's own fixed names are touched.
func cleanupStale() {
	for _, ns := range []string{nsServer, nsClient, nsLoopback} {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = sh(context.Background(), "ip", "netns", "del", ns)
	}
}
