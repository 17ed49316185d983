package storm

import (
	"log/slog"
	"net/netip"
	"time"
)

// RecordConfig says what Record captures.
type RecordConfig struct {
	// Interface is where the machine's NBD traffic arrives: the server's
	// interface (or bridge) on the boot network.
	Interface string
	// Port is the NBD server's TCP port. Default 10809.
	Port int
	// Client, if valid, limits the capture to connections from this
	// address, for recording one machine while others boot.
	Client netip.Addr
	// Idle ends the recording once no request has come for this long after
	// the first one. Default 0: only ctx ends it.
	Idle time.Duration
	// Log receives a line per session; default: discard.
	Log *slog.Logger
}

// RecordStats counts what a recording saw.
type RecordStats struct {
	Sessions int   // connections seen from their SYN
	Ignored  int   // connections already open when the capture began
	Broken   int   // connections whose stream could not be followed
	Writes   int64 // NBD_CMD_WRITEs, which a trace does not replay
}
