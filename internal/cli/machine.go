package cli

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func machineCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "machine",
		Short: "Add, list, change and remove machines (through the API of a running server)",
	}
	o.register(cmd)
	cmd.AddCommand(machineAddCmd(o), machineListCmd(o), machineShowCmd(o), machineSetCmd(o), machineRmCmd(o), machineResetCmd(o),
		machineRekeyCmd(o), machineRenderCmd(o), machinePowerCmd(o), machineNextBootCmd(o))
	return cmd
}

func machineAddCmd(o *clientOpts) *cobra.Command {
	var m api.Machine
	var labels []string
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "add --mac MAC [--name NAME] [--profile PROFILE] [--root-channel C] [--label k=v]... [--var K=V]... [--file PATH[:MODE[:OWNER]]=@TEMPLATE_FILE]...",
		Short: "Add a machine; it boots its profile at its next power-on",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if m.Labels, err = parseLabels("label", labels); err != nil {
				return err
			}
			if m.Files, m.Vars, err = ff.apply(nil, nil); err != nil {
				return err
			}
			var got api.Machine
			if err := c.do(cmd.Context(), "POST", "/machines", m, &got); err != nil {
				return err
			}
			return o.printMachine(cmd, got, "added")
		},
	}
	f := cmd.Flags()
	f.StringVar(&m.MAC, "mac", "", "Ethernet MAC, e.g. 52:54:00:12:34:56 (required)")
	f.StringVar(&m.Name, "name", "", "host name, unique")
	f.StringVar(&m.Profile, "profile", "", "profile to boot (default: the server's default profile)")
	f.StringVar(&m.IP, "ip", "", "reserved IPv4 address (full DHCP mode)")
	f.StringVar(&m.RootChannel, "root-channel", "", rootChannelHelp)
	f.StringArrayVar(&labels, "label", nil, "label key=value (repeatable)")
	ff.register(f, false)
	cmd.MarkFlagRequired("mac")
	return cmd
}

func machineListCmd(o *clientOpts) *cobra.Command {
	var state, profile string
	var labels []string
	cmd := &cobra.Command{
		Use:   "list [--state STATE] [--profile PROFILE] [--label k=v]...",
		Short: "List machines; --state discovered shows machines waiting to be enrolled",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			if profile != "" {
				q.Set("profile", profile)
			}
			for _, l := range labels {
				q.Add("label", l)
			}
			var ml api.MachineList
			if err := c.do(cmd.Context(), "GET", withQuery("/machines", q), nil, &ml); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), ml.Machines)
			}
			rows := make([][]string, 0, len(ml.Machines))
			for _, m := range ml.Machines {
				rows = append(rows, []string{m.MAC, orDash(m.Name), profileOrDefault(m.Profile), m.State,
					orDash(firstOf(m.LastAddress, m.IP)), formatTime(m.LastBoot), formatLabels(m.Labels)})
			}
			return table(cmd.OutOrStdout(), []string{"MAC", "NAME", "PROFILE", "STATE", "ADDRESS", "LAST BOOT", "LABELS"}, rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only machines in this state: discovered, ready, booting, booted or failed")
	f.StringVar(&profile, "profile", "", "only machines with this profile")
	f.StringArrayVar(&labels, "label", nil, "only machines with label key=value (repeatable)")
	return cmd
}

func channelOrProfile(c string) string {
	if c == "" {
		return "(the profile's)"
	}
	return c
}

func profileOrDefault(p string) string {
	if p == "" {
		return "(default)"
	}
	return p
}

func machineShowCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "show MAC|NAME",
		Short: "Show one machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var m api.Machine
			if err := c.do(cmd.Context(), "GET", "/machines/"+pathKey(args[0]), nil, &m); err != nil {
				return err
			}
			return o.printMachine(cmd, m, "")
		},
	}
}

// printMachine prints m as JSON or as key: value lines, after a one-line
// summary of what was done (verb) if any.
func (o *clientOpts) printMachine(cmd *cobra.Command, m api.Machine, verb string) error {
	w := cmd.OutOrStdout()
	if o.output == "json" {
		return printJSON(w, m)
	}
	if verb != "" {
		fmt.Fprintf(w, "%s machine %s\n", verb, m.MAC)
	}
	kv := [][2]string{
		{"mac", m.MAC}, {"name", orDash(m.Name)}, {"profile", profileOrDefault(m.Profile)},
		{"state", m.State}, {"reserved ip", orDash(m.IP)}, {"last address", orDash(m.LastAddress)},
		{"last boot", formatTime(m.LastBoot)}, {"labels", formatLabels(m.Labels)}, {"source", m.Source},
		{"machine-id", orDash(m.MachineID)}, {"root channel", channelOrProfile(m.RootChannel)},
	}
	return keyValues(w, append(kv, fileRows(m.Files, m.Vars)...))
}

const rootChannelHelp = "which version of its profile's root image the machine boots, over the profile's channel: production, test (the newest in test or production) or a version number to pin; empty follows the profile"

func machineSetCmd(o *clientOpts) *cobra.Command {
	var name, profile, ip, state, channel string
	var labels, unlabels []string
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "set MAC|NAME [--profile P] [--root-channel C] [--name N] [--ip A] [--label k=v]... [--unlabel k]... [--var K=V]... [--unvar K]... [--file SPEC]... [--unfile PATH]...",
		Short: "Change a machine; giving a discovered machine a profile enrolls it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var p api.MachinePatch
			f := cmd.Flags()
			if f.Changed("name") {
				p.Name = &name
			}
			if f.Changed("profile") {
				p.Profile = &profile
			}
			if f.Changed("ip") {
				p.IP = &ip
			}
			if f.Changed("root-channel") {
				p.RootChannel = &channel
			}
			if f.Changed("state") {
				p.State = &state
			}
			set, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			if len(set) > 0 || len(unlabels) > 0 {
				p.Labels = map[string]*string{}
				for k, v := range set {
					p.Labels[k] = &v
				}
				for _, k := range unlabels {
					p.Labels[k] = nil
				}
			}
			if ff.changed() {
				// PATCH replaces files and vars whole: edit the stored ones.
				var cur api.Machine
				if err := c.do(cmd.Context(), "GET", "/machines/"+pathKey(args[0]), nil, &cur); err != nil {
					return err
				}
				files, vars, err := ff.apply(cur.Files, cur.Vars)
				if err != nil {
					return err
				}
				if files == nil {
					files = []api.File{}
				}
				p.Files, p.Vars = &files, &vars
			}
			if p.Name == nil && p.Profile == nil && p.IP == nil && p.State == nil && p.Labels == nil && p.Files == nil && p.RootChannel == nil {
				return errNoChange
			}
			var m api.Machine
			if err := c.do(cmd.Context(), "PATCH", "/machines/"+pathKey(args[0]), p, &m); err != nil {
				return err
			}
			return o.printMachine(cmd, m, "updated")
		},
	}
	f := cmd.Flags()
	f.StringVar(&profile, "profile", "", "profile to boot; empty for the server's default")
	f.StringVar(&name, "name", "", "host name")
	f.StringVar(&channel, "root-channel", "", rootChannelHelp)
	f.StringVar(&ip, "ip", "", "reserved IPv4 address; empty to drop the reservation")
	f.StringVar(&state, "state", "", "set the state by hand, e.g. ready after a failure")
	f.StringArrayVar(&labels, "label", nil, "set label key=value (repeatable)")
	f.StringArrayVar(&unlabels, "unlabel", nil, "remove label key (repeatable)")
	ff.register(f, true)
	return cmd
}

func machineRmCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rm MAC|NAME",
		Short: "Remove a machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/machines/"+pathKey(args[0]), nil, nil); err != nil {
				return err
			}
			if o.output != "json" {
				fmt.Fprintf(cmd.OutOrStdout(), "removed machine %s\n", args[0])
			}
			return nil
		},
	}
}

func machineResetCmd(o *clientOpts) *cobra.Command {
	var force, migrate bool
	cmd := &cobra.Command{
		Use:   "reset MAC|NAME [--force] [--migrate]",
		Short: "Discard the machine's diskless-root overlay: its next boot sees the pristine image",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if force {
				q.Set("force", "true")
			}
			if migrate {
				q.Set("migrate", "true")
			}
			path := "/machines/" + pathKey(args[0]) + "/reset"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			var res api.ResetResult
			if err := c.do(cmd.Context(), "POST", path, nil, &res); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), res)
			}
			msg := "reset machine %s: overlay discarded\n"
			if res.Forced {
				msg = "reset machine %s: overlay discarded under the running machine; power-cycle it now\n"
			}
			fmt.Fprintf(cmd.OutOrStdout(), msg, res.MAC)
			if mv := res.Migrated; mv != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "it boots version %d of image %s next (its overlay was on version %d)\n", mv.To, mv.Image, mv.From)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "reset even while the machine is connected (its root breaks until it reboots)")
	cmd.Flags().BoolVar(&migrate, "migrate", false, "for a persistent machine whose overlay was made on an older image version: discard what it wrote and move it to the version it boots now")
	return cmd
}
