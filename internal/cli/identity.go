package cli

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func knownHostsCmd() *cobra.Command {
	o := &clientOpts{}
	var profile, machine string
	cmd := &cobra.Command{
		Use:   "known-hosts [--profile P] [--machine M]",
		Short: "Print a known_hosts file of the machines' SSH host keys, for StrictHostKeyChecking yes",
		Long: `Print one line per SSH host key of every machine that has keys (made at
its first boot of an image with sshd): its name, reserved address and
latest address, then the key. Append it to ~/.ssh/known_hosts or name it
with UserKnownHostsFile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if profile != "" {
				q.Set("profile", profile)
			}
			if machine != "" {
				q.Set("machine", machine)
			}
			path := "/known-hosts"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var kh api.KnownHosts
			if err := c.do(cmd.Context(), "GET", path, nil, &kh); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), kh)
			}
			fmt.Fprint(cmd.OutOrStdout(), kh.KnownHosts)
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&profile, "profile", "", "only machines of this profile")
	cmd.Flags().StringVar(&machine, "machine", "", "only this machine (MAC or name)")
	return cmd
}

func machineRekeyCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rekey MAC|NAME",
		Short: "Make new SSH host keys for the machine; its next boot installs them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var res api.RekeyResult
			if err := c.do(cmd.Context(), "POST", "/machines/"+pathKey(args[0])+"/rekey", nil, &res); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rekeyed machine %s; reboot it to install the new keys, then refresh known_hosts:\n", res.MAC)
			for _, fp := range res.Fingerprints {
				fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", fp)
			}
			return nil
		},
	}
}

func machineRenderCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "render MAC|NAME [PATH]",
		Short: "Show the files the machine's next boot gets from its profile's and its own files:, without booting it",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/machines/" + pathKey(args[0]) + "/files"
			if len(args) == 2 {
				path += "?" + url.Values{"path": {args[1]}}.Encode()
			}
			var res api.RenderedFiles
			if err := c.do(cmd.Context(), "GET", path, nil, &res); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), res)
			}
			if len(args) == 2 && len(res.Files) == 0 {
				return fmt.Errorf("machine %s gets no file %s; bootfleet machine render %s lists what it gets", args[0], args[1], args[0])
			}
			w := cmd.OutOrStdout()
			for i, f := range res.Files {
				if i > 0 {
					fmt.Fprintln(w)
				}
				owner := f.Owner
				if owner == "" {
					owner = "root"
				}
				fmt.Fprintf(w, "==> %s (mode %s, owner %s) <==\n%s", f.Path, f.Mode, owner, f.Content)
			}
			return nil
		},
	}
}
