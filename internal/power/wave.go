package power

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Wave spreads a command over time: Size machines every Every. The zero
// Wave is all machines at once.
type Wave struct {
	Size  int
	Every time.Duration
}

// MaxWaveEvery bounds the time between waves; a longer one is a typo.
const MaxWaveEvery = time.Hour

// ParseWave reads "N/T", e.g. "20/10s": 20 machines every 10 seconds. ""
// is the zero Wave.
func ParseWave(s string) (Wave, error) {
	if s == "" {
		return Wave{}, nil
	}
	n, t, ok := strings.Cut(s, "/")
	size, err := strconv.Atoi(n)
	if !ok || err != nil || size < 1 {
		return Wave{}, fmt.Errorf("wave: want N/T like 20/10s (20 machines every 10 s), got %q", s)
	}
	every, err := time.ParseDuration(t)
	if err != nil || every <= 0 || every > MaxWaveEvery {
		return Wave{}, fmt.Errorf("wave: want N/T with T a duration from 1ms to 1h, like 20/10s; got %q", s)
	}
	return Wave{Size: size, Every: every}, nil
}

// String is the N/T form, or "" for the zero Wave.
func (w Wave) String() string {
	if w.Size == 0 {
		return ""
	}
	return fmt.Sprintf("%d/%s", w.Size, w.Every)
}

// Split returns how many waves n machines take and the size of each.
func (w Wave) Split(n int) []int {
	if w.Size <= 0 || w.Size >= n {
		if n == 0 {
			return nil
		}
		return []int{n}
	}
	var out []int
	for n > 0 {
		k := min(n, w.Size)
		out = append(out, k)
		n -= k
	}
	return out
}
