package ndp

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Policy defaults. Routers answer a solicitation within MAX_RA_DELAY_TIME
// (0.5 s, RFC 4861 section 10) and re-advertise at least every
// MaxRtrAdvInterval (600 s by default, section 6.2.1).
const (
	// DefaultDelay is how long a solicitation waits before we answer it:
	// twice the time a real router has, so that one always speaks first.
	DefaultDelay = time.Second
	// DefaultQuiet is how long we stay silent after another router's
	// advertisement: three of its default re-advertisement intervals, so
	// one lost advertisement does not make us talk over a router.
	DefaultQuiet = 30 * time.Minute
	// DefaultPerClient is the least time between two answers to the same
	// solicitor. iPXE retries at about +0.25, +0.8, +1.8 s; one answer
	// per retry is plenty.
	DefaultPerClient = 500 * time.Millisecond
	// DefaultMulticastInterval is the least time between two multicast
	// answers (to solicitors without an address yet): RFC 4861
	// MIN_DELAY_BETWEEN_RAS.
	DefaultMulticastInterval = 3 * time.Second
	// DefaultMaxPerSecond caps answers on one interface, so a flood of
	// solicitations from forged addresses cannot make us flood the link.
	// 32 a second answers a 50-machine power-on within a couple of retries.
	DefaultMaxPerSecond = 32
	// maxPending bounds the solicitations waiting for their delay.
	maxPending = 256
)

// PolicyConfig tunes a Policy; zero fields take the defaults above.
type PolicyConfig struct {
	Delay             time.Duration
	Quiet             time.Duration
	PerClient         time.Duration
	MulticastInterval time.Duration
	MaxPerSecond      int
	// Own reports whether an address is this host's on the interface, so
	// our own advertisements (looped back, or heard from another socket of
	// ours) never count as another router. Nil: nothing is ours.
	Own func(netip.Addr) bool
	// Interface names the link in log lines.
	Interface string
	Logger    *slog.Logger
}

// Policy decides, for one interface, whether a router solicitation gets an
// answer. It is safe for concurrent use; time is always passed in, so tests
// drive it with a fake clock.
type Policy struct {
	cfg PolicyConfig
	log *slog.Logger

	mu          sync.Mutex
	router      netip.Addr // the last other router heard
	routerSeen  time.Time  // when; zero: never
	silent      bool       // we logged that we went silent for router
	answering   bool       // we logged that we answer
	pending     map[netip.Addr]bool
	lastAnswer  map[netip.Addr]time.Time
	windowStart time.Time
	windowCount int
}

// NewPolicy returns a policy with cfg's settings and defaults for the rest.
func NewPolicy(cfg PolicyConfig) *Policy {
	if cfg.Delay == 0 {
		cfg.Delay = DefaultDelay
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.PerClient == 0 {
		cfg.PerClient = DefaultPerClient
	}
	if cfg.MulticastInterval == 0 {
		cfg.MulticastInterval = DefaultMulticastInterval
	}
	if cfg.MaxPerSecond == 0 {
		cfg.MaxPerSecond = DefaultMaxPerSecond
	}
	if cfg.Own == nil {
		cfg.Own = func(netip.Addr) bool { return false }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Policy{cfg: cfg, log: log, pending: map[netip.Addr]bool{}, lastAnswer: map[netip.Addr]time.Time{}}
}

// HeardAdvertisement records a router advertisement from src. Any
// advertisement from an address that is not ours silences us for Quiet,
// whatever it says: staying silent is the safe side.
func (p *Policy) HeardAdvertisement(src netip.Addr, now time.Time) {
	if p.cfg.Own(src) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.router, p.routerSeen = src, now
	if !p.silent {
		p.silent, p.answering = true, false
		p.log.Info("ipv6 ra: another router advertises on this link; not answering router solicitations",
			"interface", p.cfg.Interface, "router", src.String(), "for_at_least", p.cfg.Quiet.String())
	}
}

// routerPresent reports whether another router was heard within Quiet.
// Callers hold mu.
func (p *Policy) routerPresent(now time.Time) bool {
	return !p.routerSeen.IsZero() && now.Sub(p.routerSeen) < p.cfg.Quiet
}

// Solicited records a router solicitation from src (the unspecified address
// for a solicitor without one). ok says whether to call Due for it at the
// returned time; false with why when it will get no answer.
func (p *Policy) Solicited(src netip.Addr, now time.Time) (at time.Time, ok bool, why string) {
	if p.cfg.Own(src) {
		return time.Time{}, false, "solicitation from our own address"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.routerPresent(now):
		return time.Time{}, false, "router " + p.router.String() + " advertised at " + p.routerSeen.Format(time.RFC3339)
	case p.pending[src]:
		return time.Time{}, false, "an answer to this solicitor is already scheduled"
	case len(p.pending) >= maxPending:
		return time.Time{}, false, "too many solicitations waiting"
	}
	p.pending[src] = true
	return now.Add(p.cfg.Delay), true, ""
}

// Due is called Delay after Solicited said ok: it reports whether to send
// the answer now. A router that advertised meanwhile, or a rate limit,
// cancels it.
func (p *Policy) Due(src netip.Addr, now time.Time) (answer bool, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, src)
	if p.routerPresent(now) {
		return false, "router " + p.router.String() + " advertised meanwhile"
	}
	interval := p.cfg.PerClient
	if !src.IsValid() || src.IsUnspecified() {
		interval = p.cfg.MulticastInterval
	}
	if last, ok := p.lastAnswer[src]; ok && now.Sub(last) < interval {
		return false, "answered this solicitor " + now.Sub(last).String() + " ago"
	}
	if now.Sub(p.windowStart) >= time.Second || now.Before(p.windowStart) {
		p.windowStart, p.windowCount = now, 0
		p.forgetOld(now)
	}
	if p.windowCount >= p.cfg.MaxPerSecond {
		return false, "rate limit of answers on this interface reached"
	}
	p.windowCount++
	p.lastAnswer[src] = now
	if !p.answering {
		p.answering, p.silent = true, false
		attrs := []any{"interface", p.cfg.Interface, "router_lifetime", 0}
		if p.router.IsValid() {
			attrs = append(attrs, "last_router", p.router.String(), "last_router_seen", p.routerSeen.Format(time.RFC3339))
		}
		p.log.Info("ipv6 ra: no router on this link; answering router solicitations so iPXE does not wait for one", attrs...)
	}
	return true, ""
}

// forgetOld drops per-solicitor times that no longer limit anything, so the
// map does not grow with every machine ever booted. Callers hold mu.
func (p *Policy) forgetOld(now time.Time) {
	for a, t := range p.lastAnswer {
		if now.Sub(t) > p.cfg.MulticastInterval && now.Sub(t) > p.cfg.PerClient {
			delete(p.lastAnswer, a)
		}
	}
}
