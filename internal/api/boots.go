package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// BootSource is where boot records come from; *telemetry.History
// implements it. Errors are the store failing.
type BootSource interface {
	Boots(ctx context.Context, f telemetry.Filter) ([]telemetry.Boot, error)
	Boot(ctx context.Context, id string) (telemetry.Boot, bool, error)
}

// BootList is the answer of GET /boots.
type BootList struct {
	Boots []telemetry.Boot `json:"boots"`
}

// MaxBootLimit bounds GET /boots?limit=.
const MaxBootLimit = 5000

// bootRoutes are served when Config.Boots is set.
var bootRoutes = []route{
	{"GET", "/boots", read, (*server).listBoots},
	{"GET", "/boots/{id}", read, (*server).getBoot},
}

func (s *server) listBoots(w http.ResponseWriter, r *http.Request) error {
	var f telemetry.Filter
	q := r.URL.Query()
	for k := range q {
		if k != "mac" && k != "since" && k != "limit" {
			return inventory.Invalid(k, "unknown query parameter; want mac, since or limit")
		}
	}
	if m := q.Get("mac"); m != "" {
		hw, err := inventory.ParseMAC(m)
		if err != nil {
			return err
		}
		f.MAC = hw
	}
	if v := q.Get("since"); v != "" {
		t, err := ParseSince(v, s.cfg.Now())
		if err != nil {
			return inventory.Invalid("since", "%v", err)
		}
		f.Since = t
	}
	f.Limit = 500
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxBootLimit {
			return inventory.Invalid("limit", "want a number from 1 to %d, got %q", MaxBootLimit, l)
		}
		f.Limit = n
	}
	bs, err := s.cfg.Boots.Boots(r.Context(), f)
	if err != nil {
		return fmt.Errorf("boot history: %w", err)
	}
	writeJSON(w, http.StatusOK, BootList{Boots: bs})
	return nil
}

func (s *server) getBoot(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	b, ok, err := s.cfg.Boots.Boot(r.Context(), id)
	if err != nil {
		return fmt.Errorf("boot history: %w", err)
	}
	if !ok {
		return inventory.NotFound("id", "no boot %q; it is older than boots.max_age or beyond boots.max_count, or the ID is wrong (see GET %s/boots)", id, Prefix)
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// ParseSince reads a time as RFC 3339 (2026-03-01T08:00:00Z), a date
// (2026-03-01, UTC) or a duration back from now (90m, 2h).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a time like 2026-03-01T08:00:00Z, a date like 2026-03-01 or a duration like 2h, got " + strconv.Quote(v))
}
