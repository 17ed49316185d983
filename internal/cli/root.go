package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/app"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/mcast"
)

// Root returns the bootfleet command tree.
func Root() *cobra.Command {
	root := &cobra.Command{
		Use:           "bootfleet",
		Short:         "Network boot server: DHCP, TFTP, HTTP boot and iPXE in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), checkCmd())
	root.AddCommand(initramfsCmd())
	root.AddCommand(machineCmd(), profileCmd(), imageCmd(), leaseCmd(), bootsCmd())
	root.AddCommand(tokenCmd(), auditCmd(), serverCmd(), knownHostsCmd())
	root.AddCommand(stormCmd(), versionCmd(), powerCmd())
	return root
}

func serveCmd() *cobra.Command {
	var path, logFormat, logLevel, store string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run DHCP, TFTP and HTTP boot services from a config file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config.Load(path)
			if err != nil {
				return err
			}
			if logFormat != "" {
				c.Log.Format = logFormat
			}
			if logLevel != "" {
				c.Log.Level = logLevel
			}
			if store != "" {
				c.Store = store
			}
			log, err := app.NewLogger(os.Stderr, c.Log.Format, c.Log.Level)
			if err != nil {
				return err
			}
			return app.Run(cmd.Context(), c, log)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "/etc/bootfleet/bootfleet.yaml", "YAML config file")
	cmd.Flags().StringVar(&logFormat, "log-format", "", "text or json (overrides log.format)")
	cmd.Flags().StringVar(&logLevel, "log-level", "", "debug, info, warn or error (overrides log.level)")
	cmd.Flags().StringVar(&store, "store", "", "inventory: a postgres:// DSN or SQLite file (overrides store; default SQLite in the data directory)")
	return cmd
}

func checkCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate a config file and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config.Load(path)
			if err != nil {
				return err
			}
			if err := describeTLS(cmd.OutOrStdout(), c); err != nil {
				return err
			}
			if err := app.CheckTemplates(c); err != nil {
				return err
			}
			if checked, err := app.CheckPins(cmd.Context(), c); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			} else if checked {
				fmt.Fprintln(cmd.OutOrStdout(), "version pins: checked against the inventory's image versions")
			}
			if c.Multicast.Mode != "off" {
				// The link speed is the interface's, so it is checked here,
				// not in the config's own validation.
				if _, err := c.Multicast.BytesPerSecond(mcast.LinkBits(c.Interface)); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
			if c.Multicast.MTFTPOn() && c.TFTP.Listen != "off" {
				fmt.Fprintf(cmd.OutOrStdout(), "mtftp: kernels of diskless profiles by mtftp:// first (requests on port %d, DATA to %s, one kernel at a time; multicast.mtftp: off to stop)\n",
					c.Multicast.MTFTPPort, c.Multicast.MTFTPGroup)
				if st, err := os.Stat(c.Multicast.UKIStub); err == nil && st.Mode().IsRegular() {
					fmt.Fprintf(cmd.OutOrStdout(), "mtftp: UEFI machines take kernel and initrds as one unified kernel image by mtftp://, built with %s\n", c.Multicast.UKIStub)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "mtftp: no systemd-stub at %s (multicast.uki_stub; Debian: apt install systemd-boot-efi): UEFI machines take only the kernel by mtftp://, the initrds by HTTP\n", c.Multicast.UKIStub)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), path+": ok")
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "/etc/bootfleet/bootfleet.yaml", "YAML config file")
	return cmd
}
