package diskprobe

import (
	"fmt"
	"strconv"
	"strings"
)

// Choice is what the admin asked for on the kernel command line with
// bootfleet.root.part=; the zero value asks for automatic selection. At
// most one field is set.
type Choice struct {
	Part     int    // bootfleet.root.part=N: partition number N ≥ 1
	PartUUID string // bootfleet.root.part=PARTUUID=x, compared case-insensitively
	Label    string // bootfleet.root.part=LABEL=x: file system label or GPT partition name
}

// ParseChoice parses the value of bootfleet.root.part=: "N",
// "PARTUUID=x" or "LABEL=x" (the prefixes in any case).
func ParseChoice(v string) (Choice, error) {
	const want = "want a partition number (e.g. 2), PARTUUID=<partuuid> or LABEL=<label>"
	if v == "" {
		return Choice{}, fmt.Errorf("bootfleet.root.part is empty: %s, or drop it to choose automatically", want)
	}
	if k, val, ok := strings.Cut(v, "="); ok {
		if val == "" {
			return Choice{}, fmt.Errorf("bootfleet.root.part=%s has an empty value: %s", v, want)
		}
		switch {
		case strings.EqualFold(k, "PARTUUID"):
			return Choice{PartUUID: val}, nil
		case strings.EqualFold(k, "LABEL"):
			return Choice{Label: val}, nil
		}
		return Choice{}, fmt.Errorf("bootfleet.root.part=%s: unknown key %q: %s", v, k, want)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strings.TrimLeft(v, "0123456789") != "" {
		return Choice{}, fmt.Errorf("bootfleet.root.part=%s: %s", v, want)
	}
	return Choice{Part: n}, nil
}

// String is the command-line form of c, or "automatic" for the zero Choice.
func (c Choice) String() string {
	switch {
	case c.Part != 0:
		return fmt.Sprintf("bootfleet.root.part=%d", c.Part)
	case c.PartUUID != "":
		return "bootfleet.root.part=PARTUUID=" + c.PartUUID
	case c.Label != "":
		return "bootfleet.root.part=LABEL=" + c.Label
	}
	return "automatic"
}

func (c Choice) automatic() bool { return c == Choice{} }
