package telemetry

import (
	"net"
	"time"
)

// PowerCause is the power command a boot followed: the record of a boot
// that bootfleet started says when and why, so a storm bootfleet started
// is timed from power-on to every machine up.
type PowerCause struct {
	Time   time.Time `json:"time"`   // when the driver was called
	Action string    `json:"action"` // on, cycle or reset
	Cause  string    `json:"cause"`  // who asked: "api:TOKEN" or "schedule:NAME"
}

// powerWindow is how long a power command waits for the boot it causes:
// firmware reaches DHCP within seconds of power-on, so a boot that starts
// later than this follows something else.
const powerWindow = 10 * time.Minute

// Powered notes that bootfleet just powered mac on (action on, cycle or
// reset) for cause; the machine's next boot that starts within
// powerWindow carries it. Only the server that ran the command knows: in
// a fleet, the record is the one of the server whose DHCP starts the
// boot, and carries the cause only if that server ran the command too.
func (r *Recorder) Powered(mac net.HardwareAddr, action, cause string) {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.powered) >= r.cfg.MaxBoots {
		for k, p := range r.powered { // a flood of commands: drop the stale
			if now.Sub(p.Time) > powerWindow {
				delete(r.powered, k)
			}
		}
		if len(r.powered) >= r.cfg.MaxBoots {
			return
		}
	}
	r.powered[mac.String()] = PowerCause{Time: now, Action: action, Cause: cause}
}

// takePower returns the power command that the boot of key starting at
// now follows, if any, and forgets it. Call with mu held.
func (r *Recorder) takePower(key string, now time.Time) *PowerCause {
	p, ok := r.powered[key]
	if !ok {
		return nil
	}
	delete(r.powered, key)
	if now.Sub(p.Time) > powerWindow || now.Before(p.Time) {
		return nil
	}
	return &p
}
