package cli

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/telemetry"
)

func bootsCmd() *cobra.Command {
	o := &clientOpts{}
	var machine, since string
	var limit int
	cmd := &cobra.Command{
		Use:   "boots",
		Short: "List recent boots: DHCP, download and total boot time",
		Long: "Lists the boots the server recorded since it started, newest first: one row per boot with\n" +
			"the time spent in DHCP, downloading (and at what speed) and in total, from the first DHCP\n" +
			"packet to the OS calling its DoneURL. `bootfleet boots show ID` prints one boot's timeline.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if machine != "" {
				mac, err := resolveMachine(cmd, c, machine)
				if err != nil {
					return err
				}
				q.Set("mac", mac)
			}
			if err := sinceLimit(q, since, limit); err != nil {
				return err
			}
			var bl api.BootList
			if err := c.do(cmd.Context(), "GET", withQuery("/boots", q), nil, &bl); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), bl.Boots)
			}
			names := machineNames(cmd, c)
			rows := make([][]string, 0, len(bl.Boots))
			for _, b := range bl.Boots {
				s := b.Summary
				rows = append(rows, []string{b.ID, machineLabel(names, b.MAC), formatTime(&b.Start), b.State,
					seconds(s.DHCPSeconds), seconds(s.DownloadSeconds), humanBytes(s.DownloadBytes),
					mbpsCol(s.DownloadMBps, s.DownloadBytes), totalCol(b), rootCol(b.RootIO)})
			}
			return table(cmd.OutOrStdout(), []string{"ID", "MACHINE", "START", "STATE", "DHCP", "DOWNLOAD", "BYTES", "MB/S", "TOTAL", "ROOT"}, rows)
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&machine, "machine", "", "only this machine (MAC or name)")
	cmd.Flags().StringVar(&since, "since", "", "only boots started since: RFC 3339 time, date or duration back (2h)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many boots (server default 500)")
	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "Print one boot's phase timeline",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var b telemetry.Boot
			if err := c.do(cmd.Context(), "GET", "/boots/"+pathKey(args[0]), nil, &b); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), b)
			}
			w := cmd.OutOrStdout()
			kv := [][2]string{{"id", b.ID}, {"machine", machineLabel(machineNames(cmd, c), b.MAC)},
				{"state", b.State}, {"start", formatTime(&b.Start)}, {"total", totalCol(b)}}
			if len(b.Path) > 0 {
				kv = append(kv, [2]string{"path", strings.Join(b.Path, " > ")})
			}
			if b.Reason != "" {
				kv = append(kv, [2]string{"reason", b.Reason})
			}
			if len(b.Servers) > 0 { // served by several servers of a fleet
				kv = append(kv, [2]string{"servers", strings.Join(b.Servers, ", ")})
			}
			if r := b.RootIO; r != nil { // the agent's root proxy reported
				kv = append(kv, [2]string{"root", rootLine(*r)})
			}
			if err := keyValues(w, kv); err != nil {
				return err
			}
			fmt.Fprintln(w)
			rows := make([][]string, 0, len(b.Phases))
			for _, p := range b.Phases {
				took, bytes, rate := seconds(p.Secs), humanBytes(p.Bytes), mbpsCol(p.MBps, p.Bytes)
				if p.Kind == "milestone" || p.Kind == "complete" {
					took = "-"
				}
				row := []string{fmt.Sprintf("+%.2fs", p.Offset), p.Name, took, bytes, rate, orDash(p.Detail)}
				if len(b.Servers) > 0 {
					row = append(row, orDash(p.Server))
				}
				rows = append(rows, row)
			}
			head := []string{"AT", "PHASE", "TOOK", "BYTES", "MB/S", "DETAIL"}
			if len(b.Servers) > 0 {
				head = append(head, "SERVER")
			}
			return table(w, head, rows)
		},
	})
	return cmd
}

// resolveMachine turns a name into a MAC through the inventory.
func resolveMachine(cmd *cobra.Command, c *client, m string) (string, error) {
	if mac, err := inventory.ParseMAC(m); err == nil {
		return mac.String(), nil
	}
	var got api.Machine
	if err := c.do(cmd.Context(), "GET", "/machines/"+pathKey(m), nil, &got); err != nil {
		return "", fmt.Errorf("--machine %q: %w", m, err)
	}
	return got.MAC, nil
}

// machineNames maps MAC to name; failure only costs the names.
func machineNames(cmd *cobra.Command, c *client) map[string]string {
	names := map[string]string{}
	var ml api.MachineList
	if c.do(cmd.Context(), "GET", "/machines", nil, &ml) == nil {
		for _, m := range ml.Machines {
			names[m.MAC] = m.Name
		}
	}
	return names
}

func machineLabel(names map[string]string, mac string) string {
	if n := names[mac]; n != "" {
		return n + " (" + mac + ")"
	}
	return mac
}

// rootLine is a root-io report in full. Lost datagrams and repairs only
// mean something where the machine joined a group.
func rootLine(r telemetry.RootIO) string {
	s := fmt.Sprintf("%s by multicast, %s by unicast (group %s); cache %s hit, %s missed; %d fallbacks",
		humanBytes(int64(r.MulticastBytes)), humanBytes(int64(r.UnicastBytes)), r.Group,
		humanBytes(int64(r.HitBytes)), humanBytes(int64(r.MissBytes)), r.Fallbacks)
	if r.Group != "off" {
		s += fmt.Sprintf("; %d datagrams lost, %d repairs asked", r.Lost, r.Repairs)
	}
	return s
}

// rootCol is a root-io report in a list's cell: the group's state, the
// share of the root that came by multicast, and what the group cost.
func rootCol(r *telemetry.RootIO) string {
	if r == nil {
		return "-"
	}
	share := "-"
	if n := r.MulticastBytes + r.UnicastBytes; n > 0 {
		share = fmt.Sprintf("%.0f%%", 100*float64(r.MulticastBytes)/float64(n))
	}
	s := fmt.Sprintf("group %s, %s multicast", r.Group, share)
	if r.Group != "off" {
		s += fmt.Sprintf(", %d lost, %d repairs", r.Lost, r.Repairs)
	}
	return s + fmt.Sprintf(", %d fallbacks", r.Fallbacks)
}

func seconds(s float64) string { return fmt.Sprintf("%.2fs", s) }

func mbpsCol(v float64, bytes int64) string {
	if bytes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func totalCol(b telemetry.Boot) string {
	if b.State != telemetry.StateComplete {
		return b.State
	}
	return seconds(b.Summary.TotalSeconds)
}

func humanBytes(n int64) string {
	switch {
	case n == 0:
		return "-"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
