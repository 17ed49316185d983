package cli

import (
	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func leaseCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Show DHCP and DHCPv6 leases (full mode)",
	}
	o.register(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List leases by address, IPv4 then IPv6, expired ones included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var ll api.LeaseList
			if err := c.do(cmd.Context(), "GET", "/leases", nil, &ll); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), ll.Leases)
			}
			// Names make the table readable; a failure here is not fatal.
			names := map[string]string{}
			var ml api.MachineList
			if c.do(cmd.Context(), "GET", "/machines", nil, &ml) == nil {
				for _, m := range ml.Machines {
					names[m.MAC] = m.Name
				}
			}
			t := now()
			rows := make([][]string, 0, len(ll.Leases))
			for _, l := range ll.Leases {
				status := "active"
				if !t.Before(l.Expiry) {
					status = "expired"
				}
				rows = append(rows, []string{l.IP, orDash(l.MAC), orDash(names[l.MAC]), formatTime(&l.Expiry), status})
			}
			return table(cmd.OutOrStdout(), []string{"ADDRESS", "MAC", "NAME", "EXPIRES", "STATUS"}, rows)
		},
	})
	return cmd
}
