package harness

import "strings"

// A report may hold a section that a quicker mode of its bench writes
// between two markers (an A/B run), which the full run keeps when it
// rewrites the rest.

// Section is md's section between begin and end, markers included, or ""
// when it has none.
func Section(md, begin, end string) string {
	i := strings.Index(md, begin)
	j := strings.Index(md, end)
	if i < 0 || j < i {
		return ""
	}
	return md[i : j+len(end)]
}

// WithSection is md with its section between begin and end replaced by
// sec, or with sec appended when it has none; an empty sec changes nothing.
func WithSection(md, begin, end, sec string) string {
	if sec == "" {
		return md
	}
	if old := Section(md, begin, end); old != "" {
		return strings.Replace(md, old, sec, 1)
	}
	return strings.TrimRight(md, "\n") + "\n\n" + sec + "\n"
}
