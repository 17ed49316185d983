package storm

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// summarize aggregates the machines; linkBps is the interface's speed in
// bit/s, 0 if unknown.
func summarize(ms []Machine, linkBps int64) Summary {
	s := Summary{Phases: map[string]Stats{}, LinkBitsPerSecond: linkBps}
	durs := map[string][]float64{}
	first, last := math.Inf(1), 0.0
	for _, m := range ms {
		switch {
		case m.Result == "ok":
			s.Booted++
			durs["boot"] = append(durs["boot"], m.Boot)
		case strings.HasSuffix(m.Result, "interrupted") || strings.HasSuffix(m.Result, "before power-on") || strings.HasSuffix(m.Result, "not powered on"):
			s.Pending++
		default:
			s.Failed++
			if s.Failures == nil {
				s.Failures = map[string]int{}
			}
			s.Failures[m.Result]++
		}
		if m.Root != nil {
			if s.Root == nil {
				s.Root = &RootSummary{}
			}
			s.Root.add(m.Root)
		}
		for _, r := range m.Images {
			if s.Images == nil {
				s.Images = &ImageSummary{}
			}
			s.Images.add(r)
		}
		if m.Boot > 0 || m.Result == "ok" {
			first = min(first, m.PowerOn)
			last = max(last, m.PowerOn+m.Boot)
		}
		for _, name := range PhaseNames {
			p := m.Phases.Get(name)
			if p == nil {
				continue
			}
			durs[name] = append(durs[name], p.Duration)
			st := s.Phases[name]
			st.Bytes += p.Bytes
			s.Phases[name] = st
			s.Bytes += p.Bytes
		}
	}
	for name, d := range durs {
		st := s.Phases[name]
		st.Count, st.P50, st.P99, st.Max = len(d), percentile(d, 50), percentile(d, 99), slices.Max(d)
		s.Phases[name] = st
	}
	if st, ok := s.Phases["boot"]; ok {
		st.Bytes = s.Bytes // every phase's, for the booted and the failed
		s.Phases["boot"] = st
	}
	if last > first {
		s.WallSeconds = last - first
	}
	if linkBps > 0 && s.WallSeconds > 0 {
		s.Utilisation = float64(s.Bytes) * 8 / s.WallSeconds / float64(linkBps)
	}
	return s
}

// percentile is the nearest-rank percentile of d (d is reordered).
func percentile(d []float64, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	sort.Float64s(d)
	rank := int(math.Ceil(p / 100 * float64(len(d))))
	return d[min(max(rank, 1), len(d))-1]
}

// WriteTable prints the report for people: per-phase times, bytes, link
// use and the failures.
func WriteTable(w io.Writer, r *Report) error {
	s := r.Summary
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tmachines\tp50 s\tp99 s\tmax s\tbytes\t")
	for _, name := range append(slices.Clone(PhaseNames), "boot") {
		st, ok := s.Phases[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%s\t\n", name, st.Count, st.P50, st.P99, st.Max, byteSize(st.Bytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d %s machines on %s: %d booted, %d failed", r.Clients, r.Firmware, r.Interface, s.Booted, s.Failed)
	if s.Pending > 0 {
		fmt.Fprintf(w, ", %d interrupted", s.Pending)
	}
	fmt.Fprintf(w, "; %s in %.2f s", byteSize(s.Bytes), s.WallSeconds)
	if s.WallSeconds > 0 {
		fmt.Fprintf(w, " (%.1f Mbit/s", float64(s.Bytes)*8/s.WallSeconds/1e6)
		if s.LinkBitsPerSecond > 0 {
			fmt.Fprintf(w, ", %.0f%% of the %d Mbit/s link", 100*s.Utilisation, s.LinkBitsPerSecond/1e6)
		} else {
			fmt.Fprint(w, "; link speed unknown")
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	if im := s.Images; im != nil && (im.MTFTP > 0 || im.MTFTPFellBack > 0 || im.URLFallbacks > 0) {
		fmt.Fprintf(w, "images: %s from the MTFTP group (%d images), %s by unicast; %d mtftp fell back to TFTP, %d URLs failed over to the next\n",
			byteSize(im.MulticastBytes), im.MTFTP, byteSize(im.UnicastBytes), im.MTFTPFellBack, im.URLFallbacks)
	}
	if len(s.Failures) > 0 {
		fmt.Fprintln(w, "\nfailed:")
		reasons := make([]string, 0, len(s.Failures))
		for k := range s.Failures {
			reasons = append(reasons, k)
		}
		sort.Slice(reasons, func(i, j int) bool {
			return s.Failures[reasons[i]] > s.Failures[reasons[j]] || s.Failures[reasons[i]] == s.Failures[reasons[j]] && reasons[i] < reasons[j]
		})
		for _, k := range reasons {
			fmt.Fprintf(w, "  %4d  %s\n", s.Failures[k], k)
		}
	}
	_, err := fmt.Fprint(w)
	return err
}
