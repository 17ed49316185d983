package tftp

import "time"

// rttEstimator computes the retransmission timeout from measured round
// trips, as TCP does (RFC 6298): SRTT and RTTVAR smoothed with gains 1/8 and
// 1/4, RTO = SRTT + 4*RTTVAR, clamped to [min, max]. Each consecutive
// timeout doubles the RTO (up to max) until a fresh sample arrives. Samples
// come only from windows that were sent once (Karn's algorithm): an ACK
// after a retransmission cannot tell which copy it answers.
type rttEstimator struct {
	srtt, rttvar time.Duration
	rto          time.Duration
	min, max     time.Duration
	hasSample    bool
}

func newRTTEstimator(initial, minRTO, maxRTO time.Duration) *rttEstimator {
	return &rttEstimator{rto: clampDur(initial, minRTO, maxRTO), min: minRTO, max: maxRTO}
}

func (e *rttEstimator) sample(r time.Duration) {
	if r <= 0 {
		r = time.Microsecond
	}
	if !e.hasSample {
		e.srtt, e.rttvar, e.hasSample = r, r/2, true
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar = (3*e.rttvar + d) / 4
		e.srtt = (7*e.srtt + r) / 8
	}
	e.rto = clampDur(e.srtt+4*e.rttvar, e.min, e.max)
}

func (e *rttEstimator) backoff() {
	e.rto = clampDur(2*e.rto, e.min, e.max)
}

func (e *rttEstimator) timeout() time.Duration { return e.rto }

func clampDur(d, lo, hi time.Duration) time.Duration {
	return max(lo, min(d, hi))
}
