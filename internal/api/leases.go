package api

import (
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func (s *server) listLeases(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.cfg.Store.ListLeases(r.Context())
	if err != nil {
		return err
	}
	ls6, err := s.cfg.Store.ListLeases6(r.Context())
	if err != nil {
		return err
	}
	out := LeaseList{Leases: make([]Lease, 0, len(ls)+len(ls6))}
	for _, l := range ls {
		out.Leases = append(out.Leases, Lease{MAC: l.MAC.String(), IP: l.IP.String(), Expiry: l.Expiry})
	}
	for _, l := range ls6 {
		out.Leases = append(out.Leases, Lease{MAC: l.MAC.String(), IP: l.IP.String(), DUID: hex.EncodeToString(l.DUID), Expiry: l.Expiry})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listEvents serves ?mac=M&limit=N, newest first.
func (s *server) listEvents(w http.ResponseWriter, r *http.Request) error {
	var f inventory.EventFilter
	q := r.URL.Query()
	for k := range q {
		if k != "mac" && k != "limit" {
			return inventory.Invalid(k, "unknown query parameter; want mac or limit")
		}
	}
	if m := q.Get("mac"); m != "" {
		hw, err := inventory.ParseMAC(m)
		if err != nil {
			return err
		}
		f.MAC = hw
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > inventory.MaxEventLimit {
			return inventory.Invalid("limit", "want a number from 1 to %d, got %q", inventory.MaxEventLimit, l)
		}
		f.Limit = n
	}
	es, err := s.cfg.Store.ListEvents(r.Context(), f)
	if err != nil {
		return err
	}
	out := EventList{Events: make([]Event, 0, len(es))}
	for _, e := range es {
		out.Events = append(out.Events, Event{ID: e.ID, Time: e.Time, MAC: e.MAC.String(), Kind: e.Kind, Details: e.Details})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

//go:embed openapi.json
var openapiJSON []byte

func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openapiJSON)
	return nil
}
