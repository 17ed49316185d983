package telemetry

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// metrics are the Prometheus series. Each Recorder has its own registry,
// so tests and several servers in one process do not collide.
//
// Not exported (yet): active NBD connections (sessions report at their end); active TFTP transfers,
// which needs a start hook in the TFTP server (OnTransfer fires at the
// end); NBD, which is not wired into the server yet.
type metrics struct {
	reg            *prometheus.Registry
	dhcpByType     [256]prometheus.Counter  // resolved once: no label hashing per packet
	dhcpReply      [256]prometheus.Observer // reply latency by request type, resolved once
	transfers      *prometheus.CounterVec
	bytes          *prometheus.CounterVec
	active         *prometheus.GaugeVec
	retransmits    prometheus.Counter
	sizeProbes     prometheus.Counter
	unattributed   *prometheus.CounterVec
	bootsStarted   prometheus.Counter
	bootsCompleted prometheus.Counter
	bootsFailed    prometheus.Counter
	bootDuration   prometheus.Histogram
	nbdSessions    *prometheus.CounterVec
	nbdBytes       *prometheus.CounterVec
	nbdOps         prometheus.Counter
	recordsDropped prometheus.Counter
	recordsStored  prometheus.Counter
	root           rootMetrics
	// served is the bytes of transfer_bytes_total and nbd_bytes_total
	// (read) in one number the fleet heartbeat can read without a scrape.
	served atomic.Uint64
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	dhcpReqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_dhcp_requests_total",
		Help: "Valid DHCP requests handled, by message type."}, []string{"type"})
	f(dhcpReqs)
	for i := range m.dhcpByType {
		m.dhcpByType[i] = dhcpReqs.WithLabelValues(dhcpTypeName(dhcpv4.MessageType(i)))
	}
	m.transfers = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_transfers_total",
		Help: "Finished file transfers by protocol (tftp, http) and result (ok, error)."}, []string{"proto", "result"})
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_transfer_bytes_total",
		Help: "File bytes delivered (TFTP: acknowledged by the client), by protocol."}, []string{"proto"})
	m.active = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "bootfleet_transfers_active",
		Help: "File transfers in progress, by protocol (http only for now)."}, []string{"proto"})
	m.retransmits = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_tftp_retransmits_total",
		Help: "TFTP DATA and OACK packets sent more than once."})
	m.sizeProbes = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_tftp_size_probes_total",
		Help: "TFTP requests that only asked for the file size (UEFI does this before each download)."})
	m.unattributed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_transfers_unattributed_total",
		Help: "Transfers that could not be tied to an open boot (unknown client address, or no boot in progress)."}, []string{"proto"})
	m.bootsStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_boots_started_total",
		Help: "Boots started: the first DHCPDISCOVER of a machine's network boot."})
	m.bootsCompleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_boots_completed_total",
		Help: "Boots whose OS called the DoneURL."})
	m.bootsFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_boots_failed_total",
		Help: "Boots that started over or went stale before boot complete, or whose client reported a failure; in a fleet only the reported ones, since the DoneURL may go to another server."})
	m.bootDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bootfleet_boot_duration_seconds",
		Help:    "First DHCP packet to boot complete.",
		Buckets: []float64{5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200}})
	dhcpReply := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bootfleet_dhcp_reply_seconds",
		Help:    "Time from a DHCP request's arrival to its reply being sent (lease commit included), by request type.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}, []string{"type"})
	f(dhcpReply)
	for i := range m.dhcpReply {
		m.dhcpReply[i] = dhcpReply.WithLabelValues(dhcpTypeName(dhcpv4.MessageType(i)))
	}
	m.nbdSessions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_nbd_sessions_total",
		Help: "Finished NBD sessions by result (ok: clean disconnect, error)."}, []string{"result"})
	m.nbdBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bootfleet_nbd_bytes_total",
		Help: "NBD payload bytes, by direction (read: to clients, write: from clients)."}, []string{"direction"})
	m.nbdOps = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_nbd_ops_total",
		Help: "NBD transmission requests handled."})
	f(m.nbdSessions)
	f(m.nbdBytes)
	f(m.nbdOps)
	for _, l := range []string{"ok", "error"} {
		m.nbdSessions.WithLabelValues(l)
	}
	for _, l := range []string{"read", "write"} {
		m.nbdBytes.WithLabelValues(l)
	}
	m.recordsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_boot_records_dropped_total",
		Help: "Ended boot records not stored in the inventory: the write queue was full, or the store failed."})
	m.recordsStored = prometheus.NewCounter(prometheus.CounterOpts{Name: "bootfleet_boot_records_stored_total",
		Help: "Boot records written to the inventory (a boot written again counts again)."})
	for _, c := range []prometheus.Collector{m.recordsDropped, m.recordsStored, m.transfers, m.bytes, m.active, m.retransmits, m.sizeProbes,
		m.unattributed, m.bootsStarted, m.bootsCompleted, m.bootsFailed, m.bootDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.root = newRootMetrics(m.reg)
	m.active.WithLabelValues("http")
	for _, p := range []string{"tftp", "http"} {
		m.bytes.WithLabelValues(p)
		m.unattributed.WithLabelValues(p)
		for _, res := range []string{"ok", "error"} {
			m.transfers.WithLabelValues(p, res)
		}
	}
	return m
}

func (m *metrics) dhcp(t dhcpv4.MessageType) { m.dhcpByType[uint8(t)].Inc() }

func (m *metrics) transfer(proto string, bytes int64, ok bool) {
	res := "ok"
	if !ok {
		res = "error"
	}
	m.transfers.WithLabelValues(proto, res).Inc()
	m.bytes.WithLabelValues(proto).Add(float64(bytes))
	m.served.Add(uint64(max(bytes, 0)))
}

func (m *metrics) tftp(st tftp.TransferStats) {
	m.retransmits.Add(float64(st.Retransmits))
	if st.SizeProbe {
		m.sizeProbes.Inc()
		return
	}
	m.transfer("tftp", st.Bytes, st.Err == nil)
}

// BytesServed is the bytes delivered since the start: TFTP and HTTP
// files, and NBD reads. A transfer or NBD session counts when it ends,
// so a long NBD session adds its bytes at once. Zero with telemetry off.
func (r *Recorder) BytesServed() uint64 { return r.m.served.Load() }

// Handler serves the metrics in the Prometheus text format, for /metrics.
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.m.reg, promhttp.HandlerOpts{})
}

// Registerer is the registry /metrics serves, for the series of other
// parts (power schedules).
func (r *Recorder) Registerer() prometheus.Registerer { return r.m.reg }

// dhcpTypeName is the metric label for a DHCP message type: "discover",
// "request", ..., or "other" for types DHCP does not define.
func dhcpTypeName(t dhcpv4.MessageType) string {
	name := strings.ToLower(strings.TrimPrefix(t.String(), "DHCP"))
	if strings.HasPrefix(name, "unknown") {
		return "other"
	}
	return name
}

func (m *metrics) nbd(st nbd.SessionStats) {
	result := "ok"
	if st.Err != nil {
		result = "error"
	}
	m.nbdSessions.WithLabelValues(result).Inc()
	m.nbdBytes.WithLabelValues("read").Add(float64(st.BytesRead))
	m.served.Add(uint64(max(st.BytesRead, 0)))
	m.nbdBytes.WithLabelValues("write").Add(float64(st.BytesWritten))
	m.nbdOps.Add(float64(st.Ops))
}

// Register adds series another service keeps (the multicast sender's) to
// /metrics.
func (r *Recorder) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.m.reg.Register(c); err != nil {
			return fmt.Errorf("telemetry: register metrics: %w", err)
		}
	}
	return nil
}
