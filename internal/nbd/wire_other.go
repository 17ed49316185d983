//go:build !linux

package nbd

import (
	"os"
	"syscall"
)

func newSocketWire(syscall.RawConn) wire { return nil }

// inPageCache is only asked on Linux, where file spans are sent.
func inPageCache(*os.File, int64, int64) bool { return true }

// pipe and pipePool exist only on Linux, which has splice(2).
type pipe struct{}
type pipePool struct{}

func (*pipePool) init(int)  {}
func (*pipePool) put(*pipe) {}
func (*pipePool) close()    {}

func (*session) splicedRead(Request, storedSpan, int64) (reply, bool) { return reply{}, false }

func (*session) spliceable(Request) (storedSpan, bool) { return storedSpan{}, false }
