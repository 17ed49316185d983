package httpboot

import (
	"net"
	"os"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/ipxe"
)

// Mirrors orders the fleet's servers a machine's boot files can come
// from. *membership.Spread implements it.
type Mirrors interface {
	// BaseURLs returns the HTTP bases of the live servers able to serve
	// content sha256 (sha "" for a profile's files, which every server
	// is taken to have), best first, and counts bytes against the first.
	BaseURLs(mac net.HardwareAddr, sha string, bytes int64) []string
}

// spread points the boot's files that this server would serve at the
// best server for them, with the others as fallbacks in the script. The
// DoneURL and milestones stay on this server, which keeps the boot's
// record; files the profile names by URL stay where they are.
func (s *server) spread(b ipxe.Boot, mac net.HardwareAddr, sha string, bytes int64) ipxe.Boot {
	if s.Mirrors == nil {
		return b
	}
	bases := s.Mirrors.BaseURLs(mac, sha, bytes)
	if len(bases) == 0 || (len(bases) == 1 && bases[0] == s.BaseURL) {
		return b
	}
	b.Kernel, b.KernelAlt = s.mirror(b.Kernel, bases)
	for i := range b.Initrds {
		b.Initrds[i].URL, b.Initrds[i].Alt = s.mirror(b.Initrds[i].URL, bases)
	}
	return b
}

// mirror is u on the first of bases, and on the others, when u is on
// this server; else u alone.
func (s *server) mirror(u string, bases []string) (string, []string) {
	rest, ok := strings.CutPrefix(u, s.BaseURL+"/")
	if !ok {
		return u, nil
	}
	alt := make([]string, 0, len(bases)-1)
	for _, b := range bases[1:] {
		alt = append(alt, b+"/"+rest)
	}
	return bases[0] + "/" + rest, alt
}

// localSize is the bytes of the profile's kernel and initrds that are
// local files, for the fleet's load accounting; 0 when none can be read.
func localSize(p inventory.ArchBoot) int64 {
	var n int64
	for _, f := range append([]string{p.Kernel}, p.Initrd...) {
		if f == "" || isURL(f) {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}
