package inventory

import (
	"fmt"
	"strings"
)

// MaxHostNameLen is the longest host name RFC 1123 section 2.1 lets
// software handle (255 octets on the wire less the DNS encoding's length
// bytes).
const MaxHostNameLen = 253

// CheckHostName says why s is not a host name per RFC 1123 section 2.1,
// or "" when it is one: dot-separated labels of 1 to 63 letters, digits
// and hyphens, neither starting nor ending with a hyphen, 253 characters
// in all. The last label must hold a letter, as RFC 1123 asks, so that a
// name is never read as a dotted-decimal address. A machine's name is
// what DHCP (option 12, the FQDN options) and its /etc/hostname carry, so
// the inventory takes nothing a resolver or the kernel would refuse.
func CheckHostName(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > MaxHostNameLen:
		return fmt.Sprintf("%d characters, at most %d", len(s), MaxHostNameLen)
	case strings.HasSuffix(s, "."):
		return "ends with a dot; give the name without the root label"
	}
	labels := strings.Split(s, ".")
	for i, l := range labels {
		switch {
		case l == "":
			return fmt.Sprintf("label %d is empty (two dots in a row, or a leading dot)", i+1)
		case len(l) > 63:
			return fmt.Sprintf("label %q is %d characters, at most 63", l, len(l))
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Sprintf("label %q starts or ends with a hyphen", l)
		}
		for j := 0; j < len(l); j++ {
			if c := l[j]; !isLetterDigit(c) && c != '-' {
				return fmt.Sprintf("%q at position %d is not a letter, digit, hyphen or dot", rune(c), strings.Index(s, l)+j+1)
			}
		}
	}
	if !strings.ContainsFunc(labels[len(labels)-1], func(r rune) bool { return r < '0' || r > '9' }) {
		return "the last label is all digits, which reads as an address; add a letter"
	}
	return ""
}

func isLetterDigit(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
