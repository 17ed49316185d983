package imagepeer

import (
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Prefix is where the peer paths start; Pattern is the one route.
const (
	Prefix  = "/peer/v1/"
	Pattern = "GET " + Prefix + "images/{sha}"
)

// Content opens stored image content; *imagestore.Store implements it.
type Content interface {
	// OpenContent opens the content with hex sha256 sha: the whole
	// content, or its layer when it is stored as one. An error wrapping
	// fs.ErrNotExist means it is not stored.
	OpenContent(sha string) (*os.File, error)
	// Parent is the content a layer is stored over; "" for content
	// stored whole.
	Parent(sha string) string
}

// LayerHeader names, in an answer, the content the body is a layer of:
// only the delta crosses the network, and the receiver checks the
// sha256 of the content read through it over its own copy of the parent.
const LayerHeader = "Bootfleet-Layer-Parent"

// HandlerConfig configures Handler.
type HandlerConfig struct {
	Content Content // required
	Secret  []byte  // the fleet's; required
	// MaxTransfers bounds the transfers served at once; more are answered
	// 503 with Retry-After, which Client reports and its caller turns
	// into trying the next peer. Default 4, range 1 to 64.
	MaxTransfers int
	Now          func() time.Time // default time.Now
	Logger       *slog.Logger     // default: discard
}

type handler struct {
	cfg   HandlerConfig
	slots chan struct{}
	log   *slog.Logger

	mu        sync.Mutex
	refusedAt time.Time // of the last refusal logged
	refused   int       // refusals since, not logged
}

// refusalLogEvery bounds the refusal log lines, so a host on the LAN
// probing the path cannot flood the log.
const refusalLogEvery = 10 * time.Second

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Handler serves Pattern to peers that sign their requests with the
// fleet's secret, streaming the file from disk.
func Handler(cfg HandlerConfig) http.Handler {
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = 4
	}
	cfg.MaxTransfers = min(cfg.MaxTransfers, 64)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{cfg: cfg, slots: make(chan struct{}, cfg.MaxTransfers), log: cfg.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc(Pattern, h.serve)
	return mux
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	if !shaRE.MatchString(sha) {
		http.Error(w, "want "+Prefix+"images/SHA256 with 64 lower-case hex digits", http.StatusNotFound)
		return
	}
	peer, err := Verify(h.cfg.Secret, r.Header.Get("Authorization"), sha, h.cfg.Now())
	if err != nil {
		h.logRefusal(r, peer, sha, err)
		http.Error(w, "image content is for the servers of this fleet only", http.StatusUnauthorized)
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		h.log.Info("image peer request deferred: all transfer slots busy", "peer", peer, "sha256", sha, "slots", cap(h.slots))
		w.Header().Set("Retry-After", "5")
		http.Error(w, "busy: "+strconv.Itoa(cap(h.slots))+" image transfers to peers at once; ask another peer or retry", http.StatusServiceUnavailable)
		return
	}
	f, err := h.cfg.Content.OpenContent(sha)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "this server holds no content "+sha, http.StatusNotFound)
		return
	}
	if err != nil {
		h.log.Error("image peer request failed", "peer", peer, "sha256", sha, "err", err)
		http.Error(w, "open content: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, "stat content: "+err.Error(), http.StatusInternalServerError)
		return
	}
	start := h.cfg.Now()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+sha+`"`)
	if parent := h.cfg.Content.Parent(sha); parent != "" {
		w.Header().Set(LayerHeader, parent)
	}
	http.ServeContent(w, r, "", st.ModTime(), f)
	if r.Method == http.MethodGet && r.Header.Get("Range") == "" {
		h.log.Info("image content sent to peer", "peer", peer, "remote", r.RemoteAddr, "sha256", sha, "size", st.Size(),
			"seconds", h.cfg.Now().Sub(start).Seconds())
	}
}

// logRefusal logs a refused request, at most one line per
// refusalLogEvery, counting those it left out.
func (h *handler) logRefusal(r *http.Request, peer, sha string, err error) {
	now := h.cfg.Now()
	h.mu.Lock()
	if now.Sub(h.refusedAt) < refusalLogEvery {
		h.refused++
		h.mu.Unlock()
		return
	}
	more := h.refused
	h.refusedAt, h.refused = now, 0
	h.mu.Unlock()
	h.log.Warn("image peer request refused", "remote", r.RemoteAddr, "peer", peer, "sha256", sha, "err", err,
		"refused_unlogged", more)
}
