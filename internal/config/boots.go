package config

import "time"

// Boots configures the boot history: boot records (the timelines of
// `bootfleet boots`) are kept in the inventory once they end, so they
// outlive a restart, and are deleted by age and by count.
type Boots struct {
	// MaxAge deletes boots that started longer ago. Default 720h (30
	// days), at least 1h.
	MaxAge Duration `yaml:"max_age"`
	// MaxCount bounds the stored boots over all machines; the oldest go
	// first. Default 100000, 100 to 10000000. A record is a few KB.
	MaxCount int `yaml:"max_count"`
}

// Bounds of boots.max_count.
const (
	minBootCount = 100
	maxBootCount = 10_000_000
)

func (b *Boots) applyDefaults() {
	if b.MaxAge == 0 {
		b.MaxAge = Duration(30 * 24 * time.Hour)
	}
	if b.MaxCount == 0 {
		b.MaxCount = 100_000
	}
}

func (b Boots) validate(bad func(key, format string, args ...any)) {
	if time.Duration(b.MaxAge) < time.Hour {
		bad("boots.max_age", "want at least 1h (e.g. 720h for 30 days), got %v", time.Duration(b.MaxAge))
	}
	if b.MaxCount < minBootCount || b.MaxCount > maxBootCount {
		bad("boots.max_count", "want %d to %d boots kept, got %d", minBootCount, maxBootCount, b.MaxCount)
	}
}
