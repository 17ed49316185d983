package cli

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func serverCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Show the bootfleet servers sharing the inventory, remove retired ones",
	}
	o.register(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List servers by name: live, stale (no heartbeat for 30 s) or stopped, with their load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var sl api.ServerList
			if err := c.do(cmd.Context(), "GET", "/servers", nil, &sl); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), sl.Servers)
			}
			t := now()
			rows := make([][]string, 0, len(sl.Servers))
			for _, s := range sl.Servers {
				rows = append(rows, []string{s.Name, s.Status, orDash(s.Version), orDash(strings.Join(s.Addrs, ",")),
					strconv.Itoa(s.TFTPTransfers), strconv.Itoa(s.NBDSessions), bytesPerSec(s.BytesPerSec),
					ago(t, s.Heartbeat), formatTime(&s.Started)})
			}
			return table(cmd.OutOrStdout(), []string{"NAME", "STATUS", "VERSION", "ADDRESSES", "TFTP", "NBD", "SERVING", "HEARTBEAT", "STARTED"}, rows)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a stale or stopped server from the fleet (a retired or dead one); a live one is refused",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/servers/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			if o.output != "json" {
				fmt.Fprintf(cmd.OutOrStdout(), "removed server %s\n", args[0])
			}
			return nil
		},
	})
	return cmd
}

func bytesPerSec(n int64) string {
	if n == 0 {
		return "-"
	}
	return humanBytes(n) + "/s"
}

// ago is how long before now t was, in whole seconds, e.g. "4s ago".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}
