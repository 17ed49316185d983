package telemetry

import "net"

// NoBoot ends the machine's open boot as failed with reason: the server
// gave its firmware no boot file, e.g. because its profile has no kernel
// for its architecture. Without an open boot it does nothing, so a
// firmware that asks again after a refusal leaves one failed record per
// attempt, never an open one.
func (r *Recorder) NoBoot(mac net.HardwareAddr, reason string) {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if b := r.open(mac.String(), now); b != nil {
		r.fail(b, reason, true)
	}
}
