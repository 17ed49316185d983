package storm

import (
	"fmt"
	"strings"
)

// renderImages tells, for every stack, how the machines got kernel and
// initrd: from the MTFTP group or by unicast, and what fell back. The
// dropped stack's fallbacks are what a network without the group costs.
func (r *report) renderImages(p func(string, ...any)) {
	var lines []string
	for _, fw := range r.Opts.firmwares {
		for _, n := range r.Opts.clients {
			for _, st := range r.Opts.stacks {
				x := r.medianRun(st, fw, n)
				if x == nil || x.Report == nil || x.Report.Summary.Images == nil {
					continue
				}
				im := x.Report.Summary.Images
				machines := max(len(x.Report.Machines), 1)
				per := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/float64(machines)/(1<<20)) }
				sent := "–"
				if mc := float64(im.MulticastBytes) / float64(machines); x.MTFTPBytes > 0 && mc > 0 {
					sent = fmt.Sprintf("%.0f MiB (%.1f×), %.0f cycles", x.MTFTPBytes/(1<<20), x.MTFTPBytes/mc, x.MTFTPCycles)
				}
				lines = append(lines, fmt.Sprintf("| %s | %d | %s | %s | %s | %d | %d | %d | %s |", fw, n, st,
					per(im.MulticastBytes), per(im.UnicastBytes), im.MTFTP, im.MTFTPFellBack, im.URLFallbacks, sent))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	p("## Where the images came from\n\n")
	p("Kernel and initrd over the machines of the median run. **by MTFTP** is what each machine took from the MTFTP ")
	p("group (once on the link for all of them), **by unicast** what it fetched for itself (HTTP, or plain TFTP after ")
	p("mtftp heard nothing). **images by MTFTP** counts the images the group delivered, **fell back to TFTP** ")
	p("the mtftp fetches that heard nothing for 1.75 s and took plain TFTP, **URL fallbacks** the script's URLs that ")
	p("failed before the next one (`kernel mtftp://… || kernel http://…`). **MTFTP sent** is what the server's ")
	p("carousel sent to the group during the storm (its /metrics, file bytes), in brackets over what one machine ")
	p("took from it: 1× is the image sent once for all.\n\n")
	p("| firmware | N | stack | by MTFTP per machine | by unicast per machine | images by MTFTP | fell back to TFTP | URL fallbacks | MTFTP sent |\n")
	p("|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	p("%s\n\n", strings.Join(lines, "\n"))
}
