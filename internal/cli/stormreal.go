package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/power"
	"github.com/bootfleet/bootfleet/internal/storm"
)

// realPoll is how often storm --real reads the boot records.
const realPoll = 2 * time.Second

// runRealStorm powers on the real machines of profile through their
// drivers (POST /power), then follows their boot records (GET /boots)
// until each has ended or timeout has passed, and reports them as the
// simulator does.
func runRealStorm(cmd *cobra.Command, o *clientOpts, profile, wave string, timeout time.Duration, output string) error {
	w, err := power.ParseWave(wave)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	o.output = output
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	t0 := time.Now()
	var powered []storm.Powered
	bar := &powerBar{w: cmd.ErrOrStderr(), tty: isTerminal(cmd.ErrOrStderr())}
	err = c.stream(ctx, "/power", api.PowerRequest{Action: string(power.On), Profile: profile, Wave: wave},
		w.Every+power.DefaultTimeout+10*time.Second, func(b []byte) error {
			var l api.PowerLine
			if err := json.Unmarshal(b, &l); err != nil {
				return fmt.Errorf("server answer is not the JSON lines expected (%w)", err)
			}
			switch l.Type {
			case "wave":
				bar.wave(l)
			case "result":
				bar.result(l)
				p := storm.Powered{MAC: l.MAC, Err: l.Error}
				if l.At != nil {
					p.At = *l.At
				}
				powered = append(powered, p)
			}
			return nil
		})
	bar.end()
	if err != nil {
		return err
	}
	q := url.Values{"since": {t0.UTC().Format(time.RFC3339)}, "limit": {strconv.Itoa(api.MaxBootLimit)}}
	var boots []storm.RealBoot
	timedOut := false
	for {
		var bl struct {
			Boots []storm.RealBoot `json:"boots"`
		}
		if err := c.do(ctx, "GET", withQuery("/boots", q), nil, &bl); err != nil {
			return err
		}
		boots = bl.Boots
		left := unfinished(powered, boots)
		fmt.Fprintf(cmd.ErrOrStderr(), "storm: %.0fs: %d of %d machines still booting\n", time.Since(t0).Seconds(), left, len(powered))
		if left == 0 {
			break
		}
		if time.Since(t0) > timeout {
			timedOut = true
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(realPoll): // polling the server's records
		}
	}
	rep := storm.RealReport(profile, t0, powered, boots, timedOut)
	out := cmd.OutOrStdout()
	if output == "json" {
		if err := printJSON(out, rep); err != nil {
			return err
		}
	} else if err := storm.WriteTable(out, rep); err != nil {
		return err
	}
	if rep.Summary.Failed > 0 {
		return fmt.Errorf("%d of %d machines failed", rep.Summary.Failed, rep.Clients)
	}
	return nil
}

// unfinished counts the powered machines whose boot after the command
// has not ended yet.
func unfinished(powered []storm.Powered, boots []storm.RealBoot) int {
	ended := map[string]bool{}
	for _, b := range boots {
		if b.Power != nil && b.State != "booting" {
			ended[strings.ToLower(b.MAC)] = true
		}
	}
	n := 0
	for _, p := range powered {
		if p.Err == "" && !ended[strings.ToLower(p.MAC)] {
			n++
		}
	}
	return n
}
