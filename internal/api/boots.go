package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

// BootSource is where boot records come from; *telemetry.Recorder
// implements it.
type BootSource interface {
	Boots(telemetry.Filter) []telemetry.Boot
	Boot(id string) (telemetry.Boot, bool)
}

// BootList is the answer of GET /boots.
type BootList struct {
	Boots []telemetry.Boot `json:"boots"`
}

// MaxBootLimit bounds GET /boots?limit=.
const MaxBootLimit = 5000

// bootRoutes are served by NewBoots, apart from the inventory API, because
// boot records live in the telemetry recorder, not in the store.
var bootRoutes = []route{
	{"GET", "/boots", (*server).listBoots},
	{"GET", "/boots/{id}", (*server).getBoot},
}

// BootsConfig configures NewBoots. Token and OpenReads mean what they mean
// in Config.
type BootsConfig struct {
	Boots     BootSource // required
	Token     string     // required, at least 16 characters
	OpenReads bool
	Logger    *slog.Logger
	Now       func() time.Time // for ?since=DURATION; default time.Now
}

// NewBoots returns the handler of GET /api/v1/boots and /api/v1/boots/{id}.
// Mount it in front of the inventory API (the paths do not overlap).
func NewBoots(cfg BootsConfig) (http.Handler, error) {
	if cfg.Boots == nil {
		return nil, errors.New("api: no boot source")
	}
	if len(cfg.Token) < 16 {
		return nil, errors.New("api: token must be at least 16 characters; use LoadOrCreateToken")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &server{cfg: Config{Token: cfg.Token, OpenReads: cfg.OpenReads, Logger: cfg.Logger, Now: cfg.Now},
		token: []byte(cfg.Token), log: cfg.Logger, mux: http.NewServeMux(), boots: cfg.Boots}
	for _, rt := range bootRoutes {
		s.mux.Handle(rt.method+" "+Prefix+rt.path, s.wrap(rt))
	}
	return s, nil
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
	writeJSON(w, http.StatusOK, BootList{Boots: s.boots.Boots(f)})
	return nil
}

func (s *server) getBoot(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	b, ok := s.boots.Boot(id)
	if !ok {
		return inventory.NotFound("id", "no boot %q; boots are kept in memory, recent ones only (see GET %s/boots)", id, Prefix)
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
