package mcast

import (
	"os"
	"strconv"
	"strings"
)

// LinkBits is the link speed of interface name in bits per second, as
// its driver reports it in /sys/class/net/NAME/speed; 0 when it reports
// none (bridges, a link that is down) or off Linux. A veth reports
// 10 Gbit/s whatever shapes it.
func LinkBits(name string) int64 {
	if name == "" || strings.ContainsAny(name, "/.") {
		return 0
	}
	b, err := os.ReadFile("/sys/class/net/" + name + "/speed")
	if err != nil {
		return 0
	}
	mbits, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || mbits <= 0 {
		return 0
	}
	return mbits * 1_000_000
}
