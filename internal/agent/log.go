package agent

import (
	"io"
	"log/slog"
	"sync"
)

// NewConsoleLogger returns a logger whose lines start with
// "bootfleet-agent: ", so they stand out among kernel messages on a serial
// console. Times are left out: the kernel's own timestamps are there.
func NewConsoleLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&prefixWriter{w: w, prefix: []byte("bootfleet-agent: ")}, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// prefixWriter prefixes every Write (slog writes whole lines).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.w.Write(append(append([]byte(nil), p.prefix...), b...))
	return len(b), err
}
