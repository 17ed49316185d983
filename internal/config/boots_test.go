package config

import (
	"strings"
	"testing"
	"time"
)

func TestBoots(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		maxAge   time.Duration
		maxCount int
		err      string
	}{
		{"defaults", "", 720 * time.Hour, 100000, ""},
		{"set", "boots: {max_age: 48h, max_count: 5000}", 48 * time.Hour, 5000, ""},
		{"age too short", "boots: {max_age: 30m}", 0, 0, "boots.max_age: want at least 1h (e.g. 720h for 30 days), got 30m0s"},
		{"negative age", "boots: {max_age: -1h}", 0, 0, "boots.max_age: want at least 1h"},
		{"too few", "boots: {max_count: 10}", 0, 0, "boots.max_count: want 100 to 10000000 boots kept, got 10"},
		{"too many", "boots: {max_count: 20000000}", 0, 0, "boots.max_count: want 100 to 10000000"},
		{"unknown key", "boots: {keep: 5}", 0, 0, "field keep not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(minimal + tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Duration(c.Boots.MaxAge) != tt.maxAge || c.Boots.MaxCount != tt.maxCount {
				t.Fatalf("boots = %v, %d; want %v, %d", time.Duration(c.Boots.MaxAge), c.Boots.MaxCount, tt.maxAge, tt.maxCount)
			}
		})
	}
}
