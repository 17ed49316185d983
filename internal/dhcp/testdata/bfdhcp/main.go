// Command bfdhcp runs only bootfleet's DHCP server, for capture.sh's
// interop scenarios (real firmware against our replies) before the real
// binary exists. Not part of the product.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

func main() {
	mode := flag.String("mode", "full", "full or proxy")
	iface := flag.String("iface", "br0", "interface")
	rng := flag.String("range", "", "full mode range A-B")
	leases := flag.String("leases", "", "lease file")
	httpBase := flag.String("http", "", "HTTP base URL")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := dhcp.Config{Interface: *iface, LeaseFile: *leases, Logger: log, Plan: pxe.PlanConfig{HTTPBase: *httpBase}}
	if *mode == "proxy" {
		cfg.Mode = dhcp.ModeProxy
	} else if a, b, ok := strings.Cut(*rng, "-"); ok {
		cfg.RangeStart, cfg.RangeEnd = net.ParseIP(a), net.ParseIP(b)
	}
	s, err := dhcp.New(cfg)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = s.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
