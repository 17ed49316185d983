package telemetry

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/dhcp"
	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/tftp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches /metrics from h and returns every sample by series name
// and label values, as the Prometheus text parser reads it.
func scrape(t *testing.T, r *Recorder) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			key := name
			for _, l := range m.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key+",count"] = float64(m.Histogram.GetSampleCount())
				out[key+",sum"] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	f := newFake(t, Config{})
	f.uefiBoot(macA, "10.0.0.10")
	f.dora(macB, ipxe)
	f.dora(macB, uefi) // restart: macB's first boot failed
	f.r.DHCPReply(dhcp.Reply{Request: dhcpv4.MessageTypeRequest, Type: dhcpv4.MessageTypeAck, Took: 3 * time.Millisecond})
	f.r.DHCPReply(dhcp.Reply{Request: dhcpv4.MessageTypeRequest, Type: dhcpv4.MessageTypeAck, Took: 5 * time.Millisecond})
	f.r.DHCPReply(dhcp.Reply{Request: dhcpv4.MessageTypeDiscover, Type: dhcpv4.MessageTypeOffer, Took: time.Millisecond})
	f.r.NBDSession(macA, nbd.SessionStats{Export: "m-x", BytesRead: 4096, BytesWritten: 512, Ops: 3})
	f.r.NBDSession(nil, nbd.SessionStats{BytesRead: 100, Ops: 1, Err: errors.New("reset by peer")})
	got := scrape(t, f.r)
	for _, tc := range []struct {
		series string
		want   float64
	}{
		{"bootfleet_dhcp_requests_total,type=discover", 5},
		{"bootfleet_dhcp_requests_total,type=request", 5},
		{"bootfleet_transfers_total,proto=tftp,result=ok", 1},
		{"bootfleet_tftp_size_probes_total", 1},
		{"bootfleet_tftp_retransmits_total", 4},
		{"bootfleet_transfers_total,proto=http,result=ok", 2},
		{"bootfleet_transfer_bytes_total,proto=http", 28_000_000},
		{"bootfleet_transfer_bytes_total,proto=tftp", 1_000_000},
		{"bootfleet_transfers_active,proto=http", 0},
		{"bootfleet_boots_started_total", 3},
		{"bootfleet_boots_completed_total", 1},
		{"bootfleet_boots_failed_total", 1},
		{"bootfleet_boot_duration_seconds,count", 1},
		{"bootfleet_boot_duration_seconds,sum", 40},
		{"bootfleet_dhcp_reply_seconds,type=request,count", 2},
		{"bootfleet_dhcp_reply_seconds,type=request,sum", 0.008},
		{"bootfleet_dhcp_reply_seconds,type=discover,count", 1},
		{"bootfleet_nbd_sessions_total,result=ok", 1},
		{"bootfleet_nbd_sessions_total,result=error", 1},
		{"bootfleet_nbd_bytes_total,direction=read", 4196},
		{"bootfleet_nbd_bytes_total,direction=write", 512},
		{"bootfleet_nbd_ops_total", 4},
	} {
		t.Run(tc.series, func(t *testing.T) {
			if v, ok := got[tc.series]; !ok || v != tc.want {
				t.Errorf("%s = %v (present %v), want %v", tc.series, v, ok, tc.want)
			}
		})
	}
}

// TestBytesServed: the fleet's bytes/s counts files and NBD reads, not
// size probes or NBD writes.
func TestBytesServed(t *testing.T) {
	r := New(Config{})
	r.TFTPTransfer(tftp.TransferStats{Filename: "ipxe.efi", Bytes: 1000})
	r.TFTPTransfer(tftp.TransferStats{Filename: "ipxe.efi", SizeProbe: true, Bytes: 999})
	r.HTTPTransferStarted()
	r.HTTPTransferDone(httpboot.FileTransfer{Name: "/vmlinuz", Bytes: 20_000})
	r.NBDSession(nil, nbd.SessionStats{BytesRead: 300_000, BytesWritten: 7})
	if got := r.BytesServed(); got != 321_000 {
		t.Fatalf("BytesServed = %d, want 321000", got)
	}
}
