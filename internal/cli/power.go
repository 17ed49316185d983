package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/power"
)

func powerCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "power",
		Short: "Power machines on, off, cycle or reset them, or read their power state",
		Long: `Power machines through their drivers (set with bootfleet machine power):
Wake-on-LAN, the default, can only power on and says only "sent"; ipmi and
redfish say the state they read back. --wave N/T powers N machines every T,
so a lab does not start a storm it does not want; without it, all at once.
A machine's failure is reported on its line and the rest go on. Needs an
operate token; every call is in the audit trail.`,
	}
	o.register(cmd)
	for _, a := range power.Actions {
		cmd.AddCommand(powerActionCmd(o, a))
	}
	cmd.AddCommand(powerSchedulesCmd(o))
	return cmd
}

func powerActionCmd(o *clientOpts, a power.Action) *cobra.Command {
	var (
		req  api.PowerRequest
		idle time.Duration
	)
	cmd := &cobra.Command{
		Use:   string(a) + " NAME...|--profile P|--all [--wave N/T]",
		Short: powerShort[a],
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Action, req.Machines = string(a), args
			if _, err := power.ParseWave(req.Wave); err != nil {
				return fmt.Errorf("--%w", err)
			}
			ways := 0
			for _, given := range []bool{len(args) > 0, req.Profile != "", req.All} {
				if given {
					ways++
				}
			}
			if ways != 1 {
				return fmt.Errorf("name machines, or give --profile P, or --all; exactly one of the three")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			wave, _ := power.ParseWave(req.Wave)
			return runPower(cmd, c, o.output, req, max(idle, wave.Every+power.DefaultTimeout+10*time.Second))
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Profile, "profile", "", "every machine of this profile")
	f.BoolVar(&req.All, "all", false, "every machine in the inventory")
	f.StringVar(&req.Wave, "wave", "", "N/T: N machines every T, e.g. 20/10s (default: all at once)")
	f.DurationVar(&idle, "idle-timeout", 0, "fail when the server says nothing for this long (default: the wave interval plus 30s)")
	return cmd
}

var powerShort = map[power.Action]string{
	power.On:     "Power machines on (Wake-on-LAN, IPMI or Redfish)",
	power.Off:    "Power machines off, at once (not a clean shutdown)",
	power.Cycle:  "Power machines off and on again",
	power.Reset:  "Reset machines (a warm reboot)",
	power.Status: "Read machines' power state",
}

// runPower sends req and shows its progress: a bar on a terminal, a line
// per wave otherwise; then a table (or JSON) of every machine's result.
// It fails when any machine failed, after showing all of them.
func runPower(cmd *cobra.Command, c *client, output string, req api.PowerRequest, idle time.Duration) error {
	stderr := cmd.ErrOrStderr()
	bar := &powerBar{w: stderr, tty: isTerminal(stderr)}
	var (
		results []api.PowerLine
		done    api.PowerLine
	)
	err := c.stream(cmd.Context(), "/power", req, idle, func(b []byte) error {
		var l api.PowerLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("server answer is not the JSON lines expected (%w); is it a bootfleet server?", err)
		}
		switch l.Type {
		case "wave":
			bar.wave(l)
		case "result":
			results = append(results, l)
			bar.result(l)
		case "done":
			done = l
		}
		return nil
	})
	bar.end()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if output == "json" {
		if results == nil {
			results = []api.PowerLine{}
		}
		if err := printJSON(w, results); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(results))
		for _, r := range results {
			rows = append(rows, []string{orDash(r.Name), r.MAC, r.Driver, fmt.Sprint(r.Wave), orDash(r.State), orDash(r.Error)})
		}
		if err := table(w, []string{"NAME", "MAC", "DRIVER", "WAVE", "STATE", "ERROR"}, rows); err != nil {
			return err
		}
	}
	if done.Type != "done" {
		return fmt.Errorf("the server's answer ended before its last line; %d machines reported", len(results))
	}
	if done.Failed > 0 {
		return fmt.Errorf("%s failed on %d of %d machines", req.Action, done.Failed, done.Size)
	}
	return nil
}

// powerBar shows the waves as they go.
type powerBar struct {
	w            io.Writer
	tty          bool
	wv, waves    int
	size, seen   int
	total, fails int
}

func (b *powerBar) wave(l api.PowerLine) {
	b.wv, b.waves, b.size, b.seen = l.Wave, l.Waves, l.Size, 0
	if !b.tty {
		fmt.Fprintf(b.w, "power: wave %d/%d: %d machines\n", l.Wave, l.Waves, l.Size)
	}
	b.draw()
}

func (b *powerBar) result(l api.PowerLine) {
	b.seen++
	b.total++
	if l.Error != "" {
		b.fails++
	}
	b.draw()
}

func (b *powerBar) draw() {
	if !b.tty || b.waves == 0 {
		return
	}
	const width = 30
	filled := width * b.wv / b.waves
	if b.seen < b.size {
		filled = width * (b.wv - 1) / b.waves
	}
	fmt.Fprintf(b.w, "\r[%s%s] wave %d/%d: %d/%d answered, %d failed so far\x1b[K",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), b.wv, b.waves, b.seen, b.size, b.fails)
}

func (b *powerBar) end() {
	if b.tty && b.waves > 0 {
		fmt.Fprintln(b.w)
	}
}

func powerSchedulesCmd(o *clientOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List the power schedules (config schedules:, and added ones) with their next and last runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var l api.ScheduleList
			if err := c.do(cmd.Context(), "GET", "/schedules", nil, &l); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if o.output == "json" {
				return printJSON(w, l)
			}
			rows := make([][]string, 0, len(l.Schedules))
			for _, s := range l.Schedules {
				rows = append(rows, []string{s.Name, s.At, s.Action, s.Machines, orDash(s.Wave), s.Source, formatTime(s.Next),
					formatTime(s.LastRun), orDash(s.LastResult)})
			}
			return table(w, []string{"NAME", "AT", "ACTION", "MACHINES", "WAVE", "SOURCE", "NEXT", "LAST RUN", "RESULT"}, rows)
		},
	}
	cmd.AddCommand(scheduleAddCmd(o), scheduleRmCmd(o))
	return cmd
}

func scheduleAddCmd(o *clientOpts) *cobra.Command {
	var in api.ScheduleIn
	cmd := &cobra.Command{
		Use:   "add NAME --at CRON --action on|off|cycle|reset --profile P|--machine NAME...|--all [--wave N/T]",
		Short: "Add a power schedule (or replace one added before); every server of the fleet runs it, once per firing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			in.Name = args[0]
			var got api.Schedule
			if err := c.do(cmd.Context(), "POST", "/schedules", in, &got); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), got)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s: %s at %q\n", got.Name, got.Action, got.At)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.At, "at", "", `cron expression, minute hour day month weekday, e.g. "30 7 * * 1-5" (CRON_TZ=Zone first for a time zone)`)
	f.StringVar(&in.Action, "action", "", "on, off, cycle or reset")
	f.StringVar(&in.Profile, "profile", "", "every machine of this profile")
	f.StringArrayVar(&in.Machines, "machine", nil, "a machine by name or MAC (repeatable)")
	f.BoolVar(&in.All, "all", false, "every machine")
	f.StringVar(&in.Wave, "wave", "", "N/T: N machines every T (default: all at once)")
	cmd.MarkFlagRequired("at")
	cmd.MarkFlagRequired("action")
	return cmd
}

func scheduleRmCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a power schedule added through the API (config schedules are removed from the file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/schedules/"+pathKey(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s removed\n", args[0])
			return nil
		},
	}
}
