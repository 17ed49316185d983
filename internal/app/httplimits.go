package app

import (
	"log/slog"
	"net"

	"github.com/bootfleet/bootfleet/internal/admission"
)

// HTTP connection bounds. A machine boots over one or two connections;
// ReadHeaderTimeout ends a slow client's hold after 10 s, and these bound
// how many one host, or all hosts, can hold meanwhile (slowloris). The
// per-client bound leaves room for a benchmark host or a NAT in front of
// a few hundred machines.
const (
	httpMaxConns          = 8192
	httpMaxConnsPerClient = 256
	httpMaxHeaderBytes    = 64 << 10
)

// limitConns wraps ln so that it closes connections beyond the bounds at
// once.
func limitConns(ln net.Listener, most, perClient int, log *slog.Logger) net.Listener {
	return admission.LimitListener(ln, admission.New(most, perClient, log, "http connections closed unserved: too many open"))
}
