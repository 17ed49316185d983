package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func machineNextBootCmd(o *clientOpts) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:   "next-boot MAC|NAME [PROFILE|local|maintenance] [--clear]",
		Short: "Boot a machine once with another profile, or from its local disk, then revert",
		Long: `Set what the machine's next network boot boots, once: a profile, local (its
boot script exits to the firmware's next device, the local disk) or
maintenance (the server's maintenance_profile). Whichever server answers that
boot takes the override; the boot after is the machine's own profile again.
With bootfleet power cycle, this reinstalls or repairs one machine from the
server. Without a target, show the override; --clear removes it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/machines/" + pathKey(args[0]) + "/next-boot"
			var got api.NextBoot
			switch {
			case clear && len(args) == 2:
				return fmt.Errorf("give a target or --clear, not both")
			case clear:
				err = c.do(cmd.Context(), "DELETE", path, nil, nil)
			case len(args) == 2:
				err = c.do(cmd.Context(), "PUT", path, api.NextBoot{Target: args[1]}, &got)
			default:
				err = c.do(cmd.Context(), "GET", path, nil, &got)
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if o.output == "json" {
				return printJSON(w, got)
			}
			switch {
			case clear:
				fmt.Fprintf(w, "%s: next boot override removed\n", args[0])
			case got.Target == "":
				fmt.Fprintf(w, "%s: no next boot override; it boots its own profile\n", args[0])
			default:
				fmt.Fprintf(w, "%s: next network boot: %s (once)\n", args[0], got.Target)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the override")
	return cmd
}
