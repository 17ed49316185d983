// Command bench runs bootfleet's benchmarks and writes their reports; see
// package harness for what they share. Run it as root from the repository
// root, after `make build`:
//
//	bench all                 every bench below, then the index
//	bench transfer [flags]    TFTP and HTTP against dnsmasq, tftp-hpa, atftpd, nginx
//	bench dhcp [flags]        DHCP DORA/s against Kea and dnsmasq
//	bench dhcp-fleet [flags]  DHCP DORA/s of three servers on one store against one
//	bench telemetry [flags]   telemetry on against off
//	bench nbd [flags]         NBD against qemu-nbd, nbdkit, nbd-server
//	bench storm [flags]       boot storms against dnsmasq + nginx + nbdkit (not in all)
//	bench nbd ab NAME=BIN...  A/B of bootfleet builds on 4 KiB random I/O
//	bench transfer ab NAME=BIN...  A/B of bootfleet builds on lockstep TFTP (-trace: perf)
//	bench index               rewrite BENCHMARKS.md from the reports present
//
// scripts/bench-deps.sh installs the peers; `make bench` does both.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/bootfleet/bootfleet/bench/dhcp"
	"github.com/bootfleet/bootfleet/bench/harness"
	"github.com/bootfleet/bootfleet/bench/nbd"
	stormbench "github.com/bootfleet/bootfleet/bench/storm"
	"github.com/bootfleet/bootfleet/bench/telemetry"
	"github.com/bootfleet/bootfleet/bench/transfer"
)

// bench is one subcommand and the report it writes.
type bench struct {
	name string
	run  func(ctx context.Context, log *slog.Logger, args []string) error
	harness.Report
}

var benches = []bench{
	{"transfer", transfer.Main, harness.Report{File: "BENCHMARKS-transfer.md",
		What: "TFTP (every option) and HTTP, one client to 200, lossy links, against dnsmasq, tftp-hpa, atftpd and nginx", Command: "make bench-transfer"}},
	{"dhcp", func(ctx context.Context, _ *slog.Logger, args []string) error { return dhcp.Main(ctx, args) },
		harness.Report{File: "BENCHMARKS-dhcp.md", What: "DHCP DORA/s and latency (SQLite and PostgreSQL stores) against Kea and dnsmasq", Command: "make bench-dhcp"}},
	{"dhcp-fleet", func(ctx context.Context, _ *slog.Logger, args []string) error { return dhcp.FleetMain(ctx, args) },
		harness.Report{File: "BENCHMARKS-dhcp-fleet.md", What: "DHCP DORA/s of three servers sharing one PostgreSQL on one LAN against one", Command: "make bench-dhcp-fleet"}},
	{"telemetry", telemetry.Main, harness.Report{File: "BENCHMARKS-telemetry.md",
		What: "what boot telemetry costs: the same downloads with it on and off", Command: "make bench-telemetry"}},
	{"nbd", nbd.Main, harness.Report{File: "BENCHMARKS-nbd.md",
		What: "NBD reads, writes and concurrent readers against qemu-nbd, nbdkit and nbd-server", Command: "make bench-nbd"}},
}

// alone are the benches `all` leaves out because they take half an hour
// or more on their own; each runs by its name.
var alone = []bench{
	{"storm", stormbench.Main, harness.Report{File: "BENCHMARKS-storm.md",
		What: "boot storms of 1 to 200 emulated machines (bootfleet storm) against dnsmasq + nginx + nbdkit, beside the link limit", Command: "make bench-storm"}},
	{"storm-desktop", func(ctx context.Context, log *slog.Logger, args []string) error {
		// Flags given later win, so ARGS may still change any of these.
		return stormbench.Main(ctx, log, append([]string{"-trace", "internal/storm/testdata/desktop.trace",
			"-out", "BENCHMARKS-storm-desktop.md", "-firmware", "uefi", "-clients", "1,5,50,200"}, args...))
	}, harness.Report{File: "BENCHMARKS-storm-desktop.md",
		What: "the same storms replaying a desktop's boot (Debian 12 with xfce4 and lightdm) and its larger working set", Command: "make bench-storm"}},
}

// reports the index links: the benches above and the VM boot benchmark,
// which test/e2e runs because it owns the VMs.
func reports() []harness.Report {
	var rs []harness.Report
	for _, b := range append(benches, alone...) {
		rs = append(rs, b.Report)
	}
	return append(rs, harness.Report{File: "BENCHMARKS-boot.md",
		What: "whole VM boots (OVMF, SeaBIOS) against dnsmasq plus a web server and a direct -kernel boot", Command: "make bench-boot"},
		harness.Report{File: "BENCHMARKS-failover.md",
			What: "the pause a diskless VM's I/O sees when its NBD server is killed and the agent fails over to the next", Command: "make e2e-failover"})
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("want a bench: all, index, or one of transfer, dhcp, telemetry, nbd, storm")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "index":
		return writeIndex()
	case "all":
		// One failing bench does not stop the others; the index links
		// whatever was written.
		var failed []string
		for _, b := range benches {
			if ctx.Err() != nil {
				break
			}
			log.Info("bench start", "bench", b.name)
			if err := b.run(ctx, log, nil); err != nil {
				log.Error("bench failed", "bench", b.name, "err", err)
				failed = append(failed, b.name)
			}
		}
		if err := writeIndex(); err != nil {
			return err
		}
		if len(failed) > 0 {
			return fmt.Errorf("failed: %v (see the log above)", failed)
		}
		return ctx.Err()
	}
	for _, b := range append(benches, alone...) {
		if b.name == name {
			if err := b.run(ctx, log, rest); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return writeIndex()
		}
	}
	return fmt.Errorf("unknown bench %q: want all, index, transfer, dhcp, telemetry, nbd, storm or storm-desktop", name)
}

func writeIndex() error {
	return os.WriteFile("BENCHMARKS.md", []byte(harness.RenderIndex(".", reports())), 0o644)
}
