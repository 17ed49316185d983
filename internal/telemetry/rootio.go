package telemetry

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RootIO is how a diskless machine's root arrived in this boot, as its
// agent's root proxy last reported it (milestone root-io): bytes by
// multicast against unicast, the read cache's hits and misses, reads of
// blocks the machine wrote, and reads that fell back to unicast.
type RootIO struct {
	Time           time.Time `json:"time"`
	MulticastBytes uint64    `json:"multicast_bytes"`
	UnicastBytes   uint64    `json:"unicast_bytes"`
	HitBytes       uint64    `json:"cache_hit_bytes"`
	MissBytes      uint64    `json:"cache_miss_bytes"`
	WrittenBytes   uint64    `json:"written_read_bytes"`
	Fallbacks      uint64    `json:"fallbacks"`
	// Lost and Repairs are the group's datagrams the machine missed and
	// the requests for them it sent: what its losses cost the others.
	Lost    uint64 `json:"lost_datagrams"`
	Repairs uint64 `json:"repairs"`
	// Overflow is those of Lost the machine's own socket dropped, full:
	// the machine did not read in time, the network did not lose them.
	Overflow uint64 `json:"socket_overflow"`
	// AheadChunks are the chunks asked for as read-ahead, following the
	// content's learned read order, and AheadUsed those the machine read:
	// the rest cost every machine of the group bytes nobody read.
	AheadChunks uint64 `json:"read_ahead_chunks"`
	AheadUsed   uint64 `json:"read_ahead_used"`
	// Group is the state of the multicast group: off (none named, or
	// bootfleet.proxy without one), on, silent (nothing arrived: the
	// network drops it; read by unicast) or lossy (too much lost).
	Group  string `json:"group"`
	Server string `json:"server,omitempty"` // the server the report reached
}

// ParseRootIO reads a root-io report's query (agent.RootIOQuery).
func ParseRootIO(q url.Values) (RootIO, error) {
	var r RootIO
	for _, f := range []struct {
		key string
		v   *uint64
	}{{"multicast", &r.MulticastBytes}, {"unicast", &r.UnicastBytes}, {"hits", &r.HitBytes}, {"misses", &r.MissBytes},
		{"written", &r.WrittenBytes}, {"fallbacks", &r.Fallbacks}} {
		n, err := strconv.ParseUint(q.Get(f.key), 10, 64)
		if err != nil {
			return r, fmt.Errorf("root-io report: %s=%q: want a count", f.key, q.Get(f.key))
		}
		*f.v = n
	}
	// Agents older than these counts do not send them.
	for _, f := range []struct {
		key string
		v   *uint64
	}{{"lost", &r.Lost}, {"overflow", &r.Overflow}, {"repairs", &r.Repairs}, {"ahead", &r.AheadChunks}, {"ahead_used", &r.AheadUsed}} {
		if q.Has(f.key) {
			n, err := strconv.ParseUint(q.Get(f.key), 10, 64)
			if err != nil {
				return r, fmt.Errorf("root-io report: %s=%q: want a count", f.key, q.Get(f.key))
			}
			*f.v = n
		}
	}
	switch r.Group = q.Get("group"); r.Group {
	case "off", "on", "silent", "lossy":
	default:
		return r, fmt.Errorf("root-io report: group=%q: want off, on, silent or lossy", r.Group)
	}
	return r, nil
}

// rootMetrics are the reports' series: the increase of every machine's
// counters, so a storm's totals add up across machines and reports.
type rootMetrics struct {
	bytes     *prometheus.CounterVec // via multicast, unicast
	cache     *prometheus.CounterVec // result hit, miss
	fallbacks prometheus.Counter
	groups    *prometheus.CounterVec // state silent, lossy: boots whose group was given up
}

func newRootMetrics(reg *prometheus.Registry) rootMetrics {
	m := rootMetrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_root_bytes_total",
			Help: "Bytes diskless machines' root proxies received, by multicast or unicast, as they report them."}, []string{"via"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_root_cache_bytes_total",
			Help: "Bytes read from diskless machines' read caches of the base (hit) or not held there (miss)."}, []string{"result"}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_root_fallbacks_total",
			Help: "Reads that waited on a multicast group and went to unicast."}),
		groups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_root_groups_given_up_total",
			Help: "Boots whose root proxy gave its multicast group up: silent (the network drops it) or lossy."}, []string{"state"}),
	}
	reg.MustRegister(m.bytes, m.cache, m.fallbacks, m.groups)
	for _, v := range []string{"multicast", "unicast"} {
		m.bytes.WithLabelValues(v)
	}
	for _, v := range []string{"hit", "miss"} {
		m.cache.WithLabelValues(v)
	}
	for _, v := range []string{"silent", "lossy"} {
		m.groups.WithLabelValues(v)
	}
	return m
}

// add counts what report adds to the last one of the same boot.
func (m rootMetrics) add(last *RootIO, report RootIO) {
	var prev RootIO
	if last != nil {
		prev = *last
	}
	d := func(now, was uint64) float64 {
		if now < was {
			return float64(now) // a new agent: counters started again
		}
		return float64(now - was)
	}
	m.bytes.WithLabelValues("multicast").Add(d(report.MulticastBytes, prev.MulticastBytes))
	m.bytes.WithLabelValues("unicast").Add(d(report.UnicastBytes, prev.UnicastBytes))
	m.cache.WithLabelValues("hit").Add(d(report.HitBytes, prev.HitBytes))
	m.cache.WithLabelValues("miss").Add(d(report.MissBytes, prev.MissBytes))
	m.fallbacks.Add(d(report.Fallbacks, prev.Fallbacks))
	if (report.Group == "silent" || report.Group == "lossy") && prev.Group != report.Group {
		m.groups.WithLabelValues(report.Group).Inc()
	}
}

// RootIO records a root-io report of mac on its latest boot, whatever
// its state (the proxy reports for as long as the machine runs), and in
// /metrics. A malformed report is an error for the caller to answer.
func (r *Recorder) RootIO(mac net.HardwareAddr, q url.Values, remote string) error {
	report, err := ParseRootIO(q)
	if err != nil {
		return err
	}
	now := r.cfg.Now().UTC()
	report.Time, report.Server = now, r.cfg.Server
	key := mac.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learnIP(hostOf(remote), key)
	bs := r.byMAC[key]
	if len(bs) == 0 {
		if r.active(key, now, now) == nil {
			r.m.root.add(nil, report)
			return nil
		}
		bs = r.byMAC[key]
	}
	b := bs[len(bs)-1]
	r.m.root.add(b.RootIO, report)
	b.RootIO = &report
	if b.State != StateBooting {
		r.publish(b) // stored already without this report
	} else {
		r.touch(b, now)
	}
	return nil
}
