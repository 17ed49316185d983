package telemetry

import (
	"net"

	"github.com/bootfleet/bootfleet/internal/httpboot"
	"github.com/bootfleet/bootfleet/internal/nbd"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// OnTransfer wraps next (may be nil) for tftp.Config.OnTransfer. Size
// probes (UEFI asks for tsize and aborts) only count in /metrics: they
// move no data and would clutter the timeline.
func (r *Recorder) OnTransfer(next func(tftp.TransferStats)) func(tftp.TransferStats) {
	return func(st tftp.TransferStats) {
		r.TFTPTransfer(st)
		if next != nil {
			next(st)
		}
	}
}

// TFTPTransfer records one finished TFTP read request.
func (r *Recorder) TFTPTransfer(st tftp.TransferStats) {
	r.m.tftp(st)
	if st.SizeProbe || st.Remote == nil {
		return
	}
	ip := hostOf(st.Remote.String())
	mac := r.macOf(ip)
	t := Transfer{Proto: "tftp", Name: st.Filename, Remote: st.Remote.String(), Bytes: st.Bytes,
		Start: st.Start.UTC(), End: st.Start.Add(st.Duration).UTC(), Seconds: secs(st.Duration),
		MBps: mbps(st.Bytes, st.Duration), BlockSize: st.BlockSize, WindowSize: st.WindowSize,
		Retransmits: st.Retransmits}
	if st.Err != nil {
		t.Err = st.Err.Error()
	}
	r.mu.Lock()
	ok := mac != "" && r.addTransfer(mac, t, stageTFTP)
	if ok {
		r.learnIP(ip, mac)
	}
	r.mu.Unlock()
	if !ok {
		r.m.unattributed.WithLabelValues("tftp").Inc()
	}
}

// HTTPTransferStarted implements httpboot.TransferObserver.
func (r *Recorder) HTTPTransferStarted() { r.m.active.WithLabelValues("http").Inc() }

// HTTPTransferDone implements httpboot.TransferObserver.
func (r *Recorder) HTTPTransferDone(ft httpboot.FileTransfer) {
	r.m.active.WithLabelValues("http").Dec()
	r.m.transfer("http", ft.Bytes, true)
	t := Transfer{Proto: "http", Name: ft.Name, Remote: ft.Remote, Bytes: ft.Bytes,
		Start: ft.Start.UTC(), End: ft.Start.Add(ft.Duration).UTC(), Seconds: secs(ft.Duration),
		MBps: mbps(ft.Bytes, ft.Duration)}
	ip := hostOf(ft.Remote)
	stage, mac := stageHTTP, ""
	if ft.MAC != nil {
		mac = ft.MAC.String()
	} else {
		// No ?mac=: not a URL from our iPXE script but firmware (UEFI
		// HTTP boot fetching the NBP), so tie it by address like TFTP.
		stage, mac = stageTFTP, r.macOf(ip)
	}
	r.mu.Lock()
	ok := mac != "" && r.addTransfer(mac, t, stage)
	if ok {
		r.learnIP(ip, mac)
	}
	r.mu.Unlock()
	if !ok {
		r.m.unattributed.WithLabelValues("http").Inc()
	}
}

// macOf maps a client address to a MAC: learned from ?mac= requests, else
// Config.LookupIP. "" when unknown.
func (r *Recorder) macOf(ip string) string {
	r.mu.Lock()
	mac := r.ips[ip]
	r.mu.Unlock()
	if mac != "" {
		return mac
	}
	// Outside the lock: the neighbour table is a file read.
	if hw := r.cfg.LookupIP(net.ParseIP(ip)); hw != nil {
		return hw.String()
	}
	return ""
}

// NBDSession records one finished NBD session of mac (nil when the export
// name named no machine): totals in /metrics, and on the machine's latest
// boot record.
func (r *Recorder) NBDSession(mac net.HardwareAddr, st nbd.SessionStats) {
	r.m.nbd(st)
	if mac == nil {
		return
	}
	now := r.cfg.Now().UTC()
	s := NBDSession{Export: st.Export, Start: now.Add(-st.Duration), Seconds: secs(st.Duration),
		BytesRead: st.BytesRead, BytesWritten: st.BytesWritten, Ops: st.Ops}
	if st.Remote != nil {
		s.Remote = st.Remote.String()
	}
	if st.Err != nil {
		s.Err = st.Err.Error()
	}
	s.Server = r.cfg.Server
	key := mac.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	bs := r.byMAC[key]
	if len(bs) == 0 {
		if r.active(key, s.Start, s.Start) == nil {
			return
		}
		bs = r.byMAC[key]
	}
	if b := bs[len(bs)-1]; len(b.NBD) < maxTransfersPerBoot {
		b.NBD = append(b.NBD, s)
		if b.State != StateBooting {
			r.publish(b) // stored already without this session
		} else {
			r.touch(b, now)
		}
	}
}
