package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/buildinfo"
)

func versionCmd() *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print which bootfleet this is",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if short {
				fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Version())
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String())
			return nil
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "only the version, as packages use it")
	return cmd
}
