package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

// imageVersionCmds are the commands of an image's versions: list them,
// and move them through test, production and retirement.
func imageVersionCmds(o *clientOpts) []*cobra.Command {
	return []*cobra.Command{imageVersionsCmd(o),
		imageStepCmd(o, "promote NAME VERSION", "Make VERSION what machines following production boot next, on every server at once; running machines keep theirs until they reboot", "promote"),
		imageStepCmd(o, "rollback NAME", "Make the previous production version current again; the rolled-back version is kept, in test, until retired", "rollback"),
		imageStepCmd(o, "retire NAME VERSION", "Retire a version nothing boots; its content is deleted from every server", "retire"),
	}
}

func imageVersionsCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "versions NAME",
		Short: "List an image's versions with their states and what boots each (profiles, machines, persistent overlays)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var vl api.ImageVersionList
			if err := c.do(cmd.Context(), "GET", "/images/"+pathKey(args[0])+"/versions", nil, &vl); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), vl.Versions)
			}
			rows := make([][]string, 0, len(vl.Versions))
			for _, v := range vl.Versions {
				state := v.State
				if v.Current {
					state += " (current)"
				}
				parent := "-"
				if v.Parent > 0 {
					parent = strconv.Itoa(v.Parent)
				}
				rows = append(rows, []string{strconv.Itoa(v.Version), state, parent, v.SHA256[:min(12, len(v.SHA256))], sizeString(v.Stored),
					orDash(v.By), formatTime(&v.Made), bootedBy(v)})
			}
			return table(cmd.OutOrStdout(), []string{"VERSION", "STATE", "PARENT", "SHA256", "STORED", "BY", "MADE", "BOOTED BY"}, rows)
		},
	}
}

// bootedBy is the BOOTED BY column: profiles, the maintenance machine,
// and the machines reading the version.
func bootedBy(v api.ImageVersion) string {
	var who []string
	for _, p := range v.Profiles {
		who = append(who, "profile "+p)
	}
	if v.Machine != "" {
		who = append(who, v.Machine+" (editing)")
	}
	for _, m := range v.Machines {
		if m.Persistent {
			who = append(who, m.MAC+" (persistent)")
		} else {
			who = append(who, m.MAC)
		}
	}
	return orDash(strings.Join(who, ", "))
}

// imageStepCmd is one step of a version's life: POST to the image's
// rollback, or to its version's op.
func imageStepCmd(o *clientOpts, use, short, op string) *cobra.Command {
	nargs := len(strings.Fields(use)) - 1
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(nargs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/images/" + pathKey(args[0]) + "/" + op
			if nargs == 2 {
				if n, err := strconv.Atoi(args[1]); err != nil || n < 1 {
					return fmt.Errorf("VERSION: want a version number (see bootfleet image versions %s), got %q", args[0], args[1])
				}
				path = "/images/" + pathKey(args[0]) + "/versions/" + args[1] + "/" + op
			}
			var v api.ImageVersion
			if err := c.do(cmd.Context(), "POST", path, nil, &v); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: image %s version %d is now %s\n", op, v.Image, v.Version, v.State)
			return nil
		},
	}
}
