// Command bootfleet is a network boot server: DHCP, TFTP, HTTP boot and
// iPXE scripts in one binary. Run `bootfleet serve --config FILE`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/bootfleet/bootfleet/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bootfleet:", err)
		stop()
		os.Exit(1)
	}
}
