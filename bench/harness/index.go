package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Report is one benchmark report the index links.
type Report struct {
	File    string // BENCHMARKS-x.md, relative to the index
	What    string // one line: what it measures against what
	Command string // how to rerun it from the repository root
}

// RenderIndex writes the index of reports in dir: for each, its title and
// the date line it was written with (read from the file), what it measures
// and the command that rewrites it. A report not written yet says so.
func RenderIndex(dir string, reports []Report) string {
	var w strings.Builder
	w.WriteString("# bootfleet benchmarks\n\n")
	w.WriteString("Every report puts each figure beside the peer tool measured in the same run and beside the\n")
	w.WriteString("physical limit, and gives the exact commands. `make bench` reruns all but the VM boots and\n")
	w.WriteString("rewrites this index; each report can also be rerun alone with the command in its row.\n")
	w.WriteString("The machines are shared and noisy: the reports quote medians of interleaved rounds, and\n")
	w.WriteString("ratios with a sign test where an edge is claimed.\n\n")
	w.WriteString("| report | measures | last written | rerun with |\n|---|---|---|---|\n")
	for _, r := range reports {
		title, date := reportHeader(filepath.Join(dir, r.File))
		link := fmt.Sprintf("[%s](%s)", r.File, r.File)
		if title != "" {
			link = fmt.Sprintf("[%s](%s)", title, r.File)
		}
		fmt.Fprintf(&w, "| %s | %s | %s | `%s` |\n", link, r.What, date, r.Command)
	}
	return w.String()
}

// reportHeader returns a report's first heading and the first date it
// names (its "Written by ... on DATE" or host line).
func reportHeader(path string) (title, date string) {
	f, err := os.Open(path)
	if err != nil {
		return "", "not written yet"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 40; n++ {
		l := sc.Text()
		if t, ok := strings.CutPrefix(l, "# "); ok && title == "" {
			title = strings.TrimSpace(t)
		}
		if date == "" {
			date = findDate(l)
		}
	}
	if date == "" {
		date = "?"
	}
	return title, date
}

// findDate returns the first YYYY-MM-DD in s, or "".
func findDate(s string) string {
	for i := 0; i+10 <= len(s); i++ {
		d := s[i : i+10]
		if isDigits(d[0:4]) && d[4] == '-' && isDigits(d[5:7]) && d[7] == '-' && isDigits(d[8:10]) {
			return d
		}
	}
	return ""
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
