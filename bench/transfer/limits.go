package transfer

// Ethernet costs on the wire beyond the IP packet: 14 bytes of header, 4 of
// FCS, and 8 of preamble plus 12 of inter-frame gap that carry no frame at
// all. tbf is given overhead = ethFCS+ethPreamble+ethIFG so that it charges
// each veth frame (which it sees as header+IP) what real Ethernet charges.
const (
	ethHeader   = 14
	ethFCS      = 4
	ethPreamble = 8
	ethIFG      = 12
	ethMinFrame = 64 // header through FCS; shorter frames are padded
	ipHeader    = 20
	udpHeader   = 8
	tftpHeader  = 4
	// tcpHeader includes the 12-byte timestamp option Linux sends by default.
	tcpHeader = 32
)

// wireBytes is what one IP packet of ipLen bytes costs on an Ethernet link.
func wireBytes(ipLen int) int {
	frame := ethHeader + ipLen + ethFCS
	if frame < ethMinFrame {
		frame = ethMinFrame
	}
	return frame + ethPreamble + ethIFG
}

// tftpBlockWire is the wire cost of one TFTP DATA packet carrying n payload
// bytes over a link with the given MTU, counting every IP fragment when the
// datagram does not fit (each fragment repeats the IP and Ethernet costs).
func tftpBlockWire(n, mtu int) int {
	l4 := n + tftpHeader + udpHeader
	if ipHeader+l4 <= mtu {
		return wireBytes(ipHeader + l4)
	}
	per := (mtu - ipHeader) &^ 7 // fragment payloads are multiples of 8
	total := 0
	for l4 > 0 {
		p := min(per, l4)
		total += wireBytes(ipHeader + p)
		l4 -= p
	}
	return total
}

// tftpLimitSeconds is the shortest possible time to move size bytes by TFTP
// with the given blksize over a link of rateBps bits per second: the data
// direction only (ACKs travel the other way on a full-duplex link), including
// the final short or empty block.
func tftpLimitSeconds(size int64, blksize, mtu int, rateBps float64) float64 {
	full := size / int64(blksize)
	rem := int(size % int64(blksize))
	bytes := full*int64(tftpBlockWire(blksize, mtu)) + int64(tftpBlockWire(rem, mtu))
	return float64(bytes) * 8 / rateBps
}

// tcpLimitSeconds is the same bound for HTTP over TCP: full-MSS segments,
// headers ignored (a few hundred bytes against hundreds of MB).
func tcpLimitSeconds(size int64, mtu int, rateBps float64) float64 {
	mss := mtu - ipHeader - tcpHeader
	segs := (size + int64(mss) - 1) / int64(mss)
	return float64(segs*int64(wireBytes(mtu))) * 8 / rateBps
}
