package nbd

import (
	"bufio"
	"io"
	"net"
)

type netAddr = net.Addr

func netPipe() (net.Conn, net.Conn) { return net.Pipe() }

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
