package dhcp

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Stage is one half of a DORA exchange as perfdhcp counts it.
type Stage struct {
	Sent, Received, Drops int
	// Latencies in milliseconds of every answered packet, from -x t.
	Latencies []float64
}

// Result is one perfdhcp run.
type Result struct {
	Rate float64 // completed 4-way exchanges per second, perfdhcp's "Rate:"
	DO   Stage   // DISCOVER-OFFER
	RA   Stage   // REQUEST-ACK
}

// DropPct is the share of DISCOVERs that did not end in an ACK.
func (r Result) DropPct() float64 {
	if r.DO.Sent == 0 {
		return 0
	}
	return 100 * float64(r.DO.Sent-r.RA.Received) / float64(r.DO.Sent)
}

// parsePerfdhcp reads perfdhcp -4 output with -x t. The layout it relies on:
//
//	Rate: 2819.16 4-way exchanges/second, expected rate: 3000
//	***Statistics for: DISCOVER-OFFER***
//	sent packets: 14999
//	received packets: 14283
//	drops: 716
//	***Timestamps for packets: DISCOVER-OFFER***
//	sent / received: 000000.000214 / 000000.002137
func parsePerfdhcp(r io.Reader) (Result, error) {
	var (
		res    Result
		cur    *Stage
		gotRat bool
	)
	stage := func(name string) *Stage {
		switch name {
		case "DISCOVER-OFFER":
			return &res.DO
		case "REQUEST-ACK":
			return &res.RA
		}
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "Rate:"):
			f := strings.Fields(line)
			if len(f) < 2 {
				return res, fmt.Errorf("perfdhcp: rate line %q, want \"Rate: N 4-way exchanges/second\"", line)
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return res, fmt.Errorf("perfdhcp: rate line %q: %w", line, err)
			}
			res.Rate, gotRat = v, true
		case strings.HasPrefix(line, "***Statistics for: "), strings.HasPrefix(line, "***Timestamps for packets: "):
			name := strings.TrimSuffix(line[strings.Index(line, ": ")+2:], "***")
			cur = stage(name)
		case cur == nil:
		case strings.HasPrefix(line, "sent packets:"):
			cur.Sent = atoiField(line)
		case strings.HasPrefix(line, "received packets:"):
			cur.Received = atoiField(line)
		case strings.HasPrefix(line, "drops:"):
			cur.Drops = atoiField(line)
		case strings.HasPrefix(line, "sent / received:"):
			f := strings.Fields(line)
			if len(f) != 6 {
				continue
			}
			s, err1 := strconv.ParseFloat(f[3], 64)
			e, err2 := strconv.ParseFloat(f[5], 64)
			if err1 == nil && err2 == nil && e >= s {
				cur.Latencies = append(cur.Latencies, (e-s)*1000)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, err
	}
	if !gotRat {
		return res, fmt.Errorf("perfdhcp: no \"Rate:\" line in its output; did it run?")
	}
	return res, nil
}

func atoiField(line string) int {
	f := strings.Fields(line)
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}
