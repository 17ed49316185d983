// Command bootfleet-agent is the /init of a bootfleet initramfs: it attaches
// the root file system from bootfleet's NBD server and switches to it. See
// internal/agent. Build it static (CGO_ENABLED=0) next to the bootfleet
// binary, where `bootfleet initramfs build` looks for it.
package main

import (
	"os"

	"github.com/bootfleet/bootfleet/internal/agent"
)

func main() {
	a := &agent.Agent{Console: os.Stdout, Log: agent.NewConsoleLogger(os.Stderr)}
	a.Main(os.Args)
}
