package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// AuditEntry is one audit record on the wire.
type AuditEntry struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	Token   string    `json:"token"`
	Remote  string    `json:"remote,omitempty"`
	Route   string    `json:"route"`
	Target  string    `json:"target,omitempty"`
	Summary string    `json:"summary,omitempty"`
	Status  int       `json:"status"`
}

// AuditList is the answer of GET /audit, newest first.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
}

func (s *server) listAudit(w http.ResponseWriter, r *http.Request) error {
	var f inventory.AuditFilter
	q := r.URL.Query()
	for k := range q {
		if k != "since" && k != "limit" {
			return inventory.Invalid(k, "unknown query parameter; want since or limit")
		}
	}
	if v := q.Get("since"); v != "" {
		t, err := ParseSince(v, s.cfg.Now())
		if err != nil {
			return inventory.Invalid("since", "%v", err)
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > inventory.MaxAuditLimit {
			return inventory.Invalid("limit", "want 1..%d, got %q", inventory.MaxAuditLimit, v)
		}
		f.Limit = n
	}
	es, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		return err
	}
	out := AuditList{Entries: make([]AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, AuditEntry{ID: e.ID, Time: e.Time.UTC(), Token: e.Token, Remote: e.Remote,
			Route: e.Route, Target: e.Target, Summary: e.Summary, Status: e.Status})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// audited reports whether a request on rt is a change the trail records:
// anything but a read.
func audited(rt route) bool { return rt.method != http.MethodGet && rt.method != http.MethodHead }

// summaryCap is how much of a JSON body the trail keeps. Bodies here are a
// few fields (a profile, a machine's profile), so this is all of them
// but a long cmdline.
const summaryCap = 256

// bodyTap keeps the first summaryCap bytes read from a request body.
type bodyTap struct {
	io.ReadCloser
	head bytes.Buffer
}

func (t *bodyTap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if room := summaryCap - t.head.Len(); room > 0 {
		t.head.Write(p[:min(n, room)])
	}
	return n, err
}

// summary is the body as compact JSON, or what is left of it when cut.
func (t *bodyTap) summary() string {
	b := t.head.Bytes()
	var out bytes.Buffer
	if json.Compact(&out, b) == nil {
		return out.String()
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// statusWriter remembers the status answered, for the trail.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// record writes one entry to the trail. It runs after the answer, on a
// context the client cannot cancel: a change that happened is recorded
// even when its client hung up. A failure is logged: the change is done.
func (s *server) record(r *http.Request, rt route, c caller, target, summary string, status int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	e := inventory.AuditEntry{Time: s.cfg.Now(), Token: c.name, Remote: r.RemoteAddr, Route: rt.method + " " + rt.path,
		Target: target, Summary: summary, Status: status}
	if err := s.cfg.Store.AddAudit(ctx, e); err != nil {
		s.log.Error("audit trail: record failed", "token", c.name, "route", e.Route, "target", target, "status", status, "err", err)
	}
}

// target is what a route's path names: a MAC, profile, image, token or boot.
func target(r *http.Request) string {
	for _, k := range []string{"mac", "name", "id"} {
		if v := r.PathValue(k); v != "" {
			return v
		}
	}
	return ""
}

// note is the summary a handler gives for the trail, when its body says
// too little (an image upload) or would say too much.
type note struct{ text string }

type noteKey struct{}

// setNote gives the trail's summary of r.
func setNote(r *http.Request, text string) {
	if n, ok := r.Context().Value(noteKey{}).(*note); ok {
		n.text = text
	}
}
