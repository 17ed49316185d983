// Package admission bounds how many of something run at once, in all and
// per client address, and turns the rest away: TFTP transfers, NBD
// handshakes and HTTP connections under a flood. What it turns away it
// counts, and says so in one log line a second at most, so that a flood
// does not flood the log too.
//
// [Limiter] is the count; [LimitListener] applies one to a listener's
// connections, closing those past the bounds before reading a byte.
package admission
