package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Prefix is where the API is mounted.
const Prefix = "/api/v1"

// MaxBody bounds a request body; an inventory record is a few hundred bytes.
const MaxBody = 1 << 20

// Config configures the API handler.
type Config struct {
	Store inventory.Store // required
	// Token is the api-token file's token, an admin token; required (New
	// refuses an empty one). Other tokens are in Store, hashed.
	Token string
	// OpenReads lets GET requests through without the token. Default false.
	OpenReads bool
	// OnChange is called after every successful write to machines or
	// profiles, so the caller can refresh its in-memory fleet view.
	OnChange func()
	// Images serves /images; nil answers them 400 (no images here).
	Images ImageService
	// Disks resets overlays for POST /machines/{mac}/reset; nil refuses.
	Disks DiskResetter
	// Migrations, if set, has POST /machines/{mac}/reset refuse, unless
	// migrate=true, to move a persistent machine to another version.
	Migrations MigrationChecker
	// Boots serves GET /boots and /boots/{id}; nil answers them 404. Boot
	// records live in the telemetry recorder, not in the store.
	Boots BootSource
	// Identities serves known-hosts, rekey and files; nil answers them
	// 400 (no identities here).
	Identities IdentityService
	// MaintenanceProfile is what next-boot target maintenance boots (the
	// config's maintenance_profile); "" refuses that target.
	MaintenanceProfile string
	// Schedules lists GET /schedules; nil lists none.
	Schedules ScheduleLister
	// Power carries out POST /power; nil refuses it.
	Power  PowerRunner
	Logger *slog.Logger     // default: discard
	Now    func() time.Time // default time.Now; for event times and ?since=
}

// route is one API endpoint. The table drives the mux, the test that
// keeps openapi.json complete and the test of each route's scope.
type route struct {
	method, path string // path as in openapi.json, under Prefix
	// scope is what a token needs for the route; "" is open to anyone
	// (only the OpenAPI document). api.open_reads opens the read routes.
	scope inventory.Scope
	h     func(*server, http.ResponseWriter, *http.Request) error
}

// streaming routes read a body of any size (image uploads), not JSON.
var streaming = map[string]bool{"PUT /images/{name}": true}

const (
	read    = inventory.ScopeRead
	operate = inventory.ScopeOperate
	admin   = inventory.ScopeAdmin
)

// routes: read lists and shows; operate is what re-images a PC (PATCH a
// machine's profile, reset its overlay), PATCH of any other field needs
// admin (see patchMachine); admin is what changes what the fleet is.
var routes = []route{
	{"GET", "/machines", read, (*server).listMachines},
	{"POST", "/machines", admin, (*server).createMachine},
	{"GET", "/machines/{mac}", read, (*server).getMachine},
	{"PUT", "/machines/{mac}", admin, (*server).putMachine},
	{"PATCH", "/machines/{mac}", operate, (*server).patchMachine},
	{"DELETE", "/machines/{mac}", admin, (*server).deleteMachine},
	{"GET", "/profiles", read, (*server).listProfiles},
	{"POST", "/profiles", admin, (*server).createProfile},
	{"GET", "/profiles/{name}", read, (*server).getProfile},
	{"PUT", "/profiles/{name}", admin, (*server).putProfile},
	{"DELETE", "/profiles/{name}", admin, (*server).deleteProfile},
	{"POST", "/machines/{mac}/reset", operate, (*server).resetMachine},
	{"POST", "/machines/{mac}/rekey", admin, (*server).rekeyMachine},
	// Files may hold what the admin keeps from readers (a kiosk's
	// password, say): admin only, like the config they come from.
	{"GET", "/machines/{mac}/files", admin, (*server).machineFiles},
	{"GET", "/known-hosts", read, (*server).knownHosts},
	{"GET", "/machines/{mac}/power", read, (*server).getPower},
	{"PUT", "/machines/{mac}/power", admin, (*server).putPower},
	{"DELETE", "/machines/{mac}/power", admin, (*server).deletePower},
	{"POST", "/power", operate, (*server).runPower},
	{"GET", "/machines/{mac}/next-boot", read, (*server).getNextBoot},
	{"PUT", "/machines/{mac}/next-boot", operate, (*server).putNextBoot},
	{"DELETE", "/machines/{mac}/next-boot", operate, (*server).deleteNextBoot},
	{"GET", "/schedules", read, (*server).listSchedules},
	{"POST", "/schedules", admin, (*server).putSchedule},
	{"DELETE", "/schedules/{name}", admin, (*server).deleteSchedule},
	{"GET", "/images", read, (*server).listImages},
	{"GET", "/images/{name}", read, (*server).getImage},
	{"PUT", "/images/{name}", admin, (*server).putImage},
	{"DELETE", "/images/{name}", admin, (*server).deleteImage},
	{"GET", "/images/{name}/versions", read, (*server).listVersions},
	{"POST", "/images/{name}/versions/{version}/promote", operate, stepVersion(inventory.OpPromote)},
	{"POST", "/images/{name}/rollback", operate, stepVersion(inventory.OpRollback)},
	{"POST", "/images/{name}/versions/{version}/retire", admin, stepVersion(inventory.OpRetire)},
	{"POST", "/images/{name}/edit", operate, (*server).editImage},
	{"POST", "/images/{name}/commit", operate, closeEdit(inventory.OpCommit)},
	{"POST", "/images/{name}/abandon", operate, closeEdit(inventory.OpAbandon)},
	{"POST", "/images/{name}/merge", admin, (*server).mergeImage},
	{"GET", "/images/{name}/merge", read, (*server).getMerge},
	{"GET", "/leases", read, (*server).listLeases},
	{"GET", "/events", read, (*server).listEvents},
	{"GET", "/servers", read, (*server).listServers},
	{"DELETE", "/servers/{name}", admin, (*server).removeServer},
	{"GET", "/tokens", admin, (*server).listTokens},
	{"POST", "/tokens", admin, (*server).createToken},
	{"DELETE", "/tokens/{name}", admin, (*server).deleteToken},
	{"GET", "/audit", admin, (*server).listAudit},
	{"GET", "/openapi.json", "", (*server).openAPI},
}

type server struct {
	cfg   Config
	token []byte
	log   *slog.Logger
	mux   *http.ServeMux
}

// New returns the API handler; mount it at Prefix + "/" (it expects the
// full path, Prefix included).
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: no store")
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
	if cfg.OnChange == nil {
		cfg.OnChange = func() {}
	}
	s := &server{cfg: cfg, token: []byte(cfg.Token), log: cfg.Logger, mux: http.NewServeMux()}
	all := routes
	if cfg.Boots != nil {
		all = append(append([]route(nil), routes...), bootRoutes...)
	}
	for _, rt := range all {
		s.mux.Handle(rt.method+" "+Prefix+rt.path, s.wrap(rt))
	}
	return s, nil
}

// ServeHTTP answers unknown paths and methods in JSON too, so clients
// never have to parse text/plain errors.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values Handler does not
		return
	}
	// The mux would answer 404 or 405 (with Allow); keep its verdict.
	rec := &statusRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.status == http.StatusMethodNotAllowed {
		writeJSON(w, rec.status, ErrorBody{Error: fmt.Sprintf("method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, allowOr(rec.header))})
		return
	}
	writeJSON(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no API endpoint %s; see %s/openapi.json", r.URL.Path, Prefix)})
}

func allowOr(h http.Header) string {
	if a := h.Get("Allow"); a != "" {
		return a
	}
	return "none"
}

type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// wrap authenticates, checks the route's scope, bounds the body, runs the
// handler and records every change in the audit trail. A request without a
// valid token is not recorded: it has no one to name, and recording it
// would let anyone fill the trail.
func (s *server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		open := rt.scope == "" || (s.cfg.OpenReads && rt.scope == read && r.Method == http.MethodGet)
		var c caller
		if !open {
			var err error
			if c, err = s.authenticate(r); err != nil {
				s.writeError(w, r, err)
				return
			}
			r = withCaller(r, c)
		}
		var tap *bodyTap
		if !streaming[rt.method+" "+rt.path] {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
			if audited(rt) {
				tap = &bodyTap{ReadCloser: r.Body}
				r.Body = tap
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		n := &note{}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, n))
		var err error
		if !open {
			err = require(r, rt.scope, rt.method+" "+rt.path)
		}
		if err == nil {
			err = rt.h(s, sw, r)
		}
		if err != nil {
			s.writeError(sw, r, err)
		}
		if !open && audited(rt) {
			sum := n.text
			if sum == "" && tap != nil {
				sum = tap.summary()
			}
			if sum == "" {
				sum = r.URL.RawQuery
			}
			s.record(r, rt, c, target(r), sum, max(sw.status, http.StatusOK))
		}
	})
}

// writeError maps an error to a status. Typed inventory errors and request
// problems are 4xx; anything else is the server's fault, logged, and 500.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		ie  *inventory.Error
		mbe *http.MaxBytesError
	)
	var (
		ue *errUnauthorized
		fe *errForbidden
		na *errUnavailable
	)
	switch {
	case errors.As(err, &na):
		s.log.Error("api request refused: no identity key", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: na.Error()})
	case errors.As(err, &ue):
		w.Header().Set("WWW-Authenticate", `Bearer realm="bootfleet"`)
		writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: ue.msg})
	case errors.As(err, &fe):
		writeJSON(w, http.StatusForbidden, ErrorBody{Error: fe.Error()})
	case errors.As(err, &mbe):
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorBody{Error: fmt.Sprintf("request body is over %d bytes", mbe.Limit)})
	case errors.As(err, &ie):
		status := http.StatusBadRequest
		switch {
		case errors.Is(ie.Kind, inventory.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(ie.Kind, inventory.ErrConflict):
			status = http.StatusConflict
		}
		writeJSON(w, status, ErrorBody{Error: ie.Msg, Field: ie.Field})
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
	default:
		s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Error: "internal error; see the server log"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error": "encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads one JSON value into v, rejecting unknown fields and
// trailing data, and turns decoder errors into field errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return inventory.Invalid("", "request body has data after the JSON value; send exactly one object")
	}
	return nil
}

func bodyError(err error) error {
	var (
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return inventory.Invalid("", "request body is empty; send a JSON object")
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return inventory.Invalid("", "request body is not valid JSON: %v", err)
	case errors.As(err, &te):
		return inventory.Invalid(te.Field, "want a JSON %s, got %s", te.Type, te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f = strings.Trim(f, `"`)
		return inventory.Invalid(f, "unknown field %q; see %s/openapi.json", f, Prefix)
	}
	return inventory.Invalid("", "request body: %v", err)
}

// readOnly says whether the caller may change rec: config records are
// rewritten from the config file at every start.
func readOnly(src inventory.Source, field, what string) error {
	if src == inventory.SourceConfig {
		return inventory.Conflict(field, "%s is declared in the config file; change it there and restart bootfleet", what)
	}
	return nil
}
