package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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
		imageEditCmd(o),
		imageMergeCmd(o),
		imageCloseCmd(o, "commit", "Close the maintenance version: what its machine wrote becomes a test version (refused while the machine runs, unless --force)"),
		imageCloseCmd(o, "abandon", "Throw the maintenance version away with everything its machine wrote (refused while the machine runs, unless --force)"),
	}
}

func imageEditCmd(o *clientOpts) *cobra.Command {
	var machine string
	cmd := &cobra.Command{
		Use:   "edit NAME --machine M",
		Short: "Open a maintenance version over the newest version: machine M, and only M, boots it read-write at its next boot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if machine == "" {
				return fmt.Errorf("--machine: want the MAC or name of the machine that edits the image")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var v api.ImageVersion
			if err := c.do(cmd.Context(), "POST", "/images/"+pathKey(args[0])+"/edit", api.EditRequest{Machine: machine}, &v); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "image %s version %d is open for maintenance over version %d: boot %s from server %s, make your changes, shut it down, then run bootfleet image commit %s\n",
				v.Image, v.Version, v.Parent, v.Machine, v.Server, v.Image)
			return nil
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the MAC or name of the machine that boots the version read-write")
	return cmd
}

func imageCloseCmd(o *clientOpts, op, short string) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   op + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/images/" + pathKey(args[0]) + "/" + op
			if force {
				path += "?force=true"
			}
			var v api.ImageVersion
			if err := c.do(cmd.Context(), "POST", path, nil, &v); err != nil {
				return err
			}
			if op == "commit" {
				if v, err = c.waitCommit(cmd.Context(), v); err != nil {
					return err
				}
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			if op == "abandon" {
				fmt.Fprintf(cmd.OutOrStdout(), "abandoned image %s version %d\n", v.Image, v.Version)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "committed image %s version %d: now test, sha256 %s, %s stored\n", v.Image, v.Version, v.SHA256, sizeString(v.Stored))
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "close it under its machine, which is still running it; what it had not written back is lost")
	return cmd
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
				if c := v.Commit; c != nil && c.Error != "" {
					state += " (commit failed: " + c.Error + ")"
				} else if c != nil && c.Total > 0 {
					state += fmt.Sprintf(" (committing: %d%%)", c.Done*100/c.Total)
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
// machines following it by their own channel, and the machines reading
// the version.
func bootedBy(v api.ImageVersion) string {
	var who []string
	for _, p := range v.Profiles {
		who = append(who, "profile "+p)
	}
	if v.Machine != "" {
		who = append(who, v.Machine+" (editing)")
	}
	for _, m := range v.ChannelMachines {
		who = append(who, m+" (own channel)")
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

// imageMergeCmd starts a merge on the server and follows it, a line per
// tenth done, until it ends (or returns at once with --no-wait).
func imageMergeCmd(o *clientOpts) *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "merge NAME [VERSION]",
		Short: "Merge a version's layers (default: the current production version) into a whole file on the server, in the background; machines keep booting meanwhile",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/images/" + pathKey(args[0]) + "/merge"
			start := path
			if len(args) == 2 {
				if n, err := strconv.Atoi(args[1]); err != nil || n < 1 {
					return fmt.Errorf("VERSION: want a version number (see bootfleet image versions %s), got %q", args[0], args[1])
				}
				start += "?version=" + args[1]
			}
			var m api.ImageMerge
			if err := c.do(cmd.Context(), "POST", start, nil, &m); err != nil {
				return err
			}
			decile := int64(-1)
			for !noWait && m.Finished == nil {
				if m.Total > 0 && m.Done*10/m.Total > decile {
					decile = m.Done * 10 / m.Total
					fmt.Fprintf(cmd.ErrOrStderr(), "merge %s version %d: %d%% (%s of %s)\n", m.Image, m.Version, decile*10, sizeString(m.Done), sizeString(m.Total))
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(500 * time.Millisecond): // polling a server-side job, not synchronising a test
				}
				if err := c.do(cmd.Context(), "GET", path, nil, &m); err != nil {
					return err
				}
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), m)
			}
			switch {
			case m.Error != "":
				return fmt.Errorf("merge of image %s version %d failed: %s", m.Image, m.Version, m.Error)
			case m.Finished == nil:
				fmt.Fprintf(cmd.OutOrStdout(), "merging image %s version %d in the background; follow it with GET /api/v1/images/NAME/merge\n", m.Image, m.Version)
			case m.Total == 0:
				fmt.Fprintf(cmd.OutOrStdout(), "image %s version %d is stored whole already\n", m.Image, m.Version)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "merged image %s version %d into a whole file (%s)\n", m.Image, m.Version, sizeString(m.Total))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "return once the merge has started")
	return cmd
}

// commitPoll is how often image commit asks how far the commit got.
const commitPoll = time.Second

// waitCommit follows a commit the server stores in the background until
// the version is test, and returns it as listed then.
func (c *client) waitCommit(ctx context.Context, v api.ImageVersion) (api.ImageVersion, error) {
	tick := time.NewTicker(commitPoll)
	defer tick.Stop()
	path := "/images/" + pathKey(v.Image) + "/versions"
	for {
		var vl api.ImageVersionList
		if err := c.do(ctx, "GET", path, nil, &vl); err != nil {
			return v, fmt.Errorf("the commit of image %s version %d goes on at the server, but asking how far it got failed: %w", v.Image, v.Version, err)
		}
		i := slices.IndexFunc(vl.Versions, func(w api.ImageVersion) bool { return w.Version == v.Version })
		if i < 0 {
			return v, fmt.Errorf("image %s has no version %d any more; see bootfleet image versions %s", v.Image, v.Version, v.Image)
		}
		w := vl.Versions[i]
		switch {
		case w.State != "maintenance":
			return w, nil
		case w.Commit == nil:
			return w, fmt.Errorf("image %s version %d is in maintenance and the server commits nothing (did it restart?); run bootfleet image commit %s again", v.Image, v.Version, v.Image)
		case w.Commit.Error != "":
			return w, fmt.Errorf("the commit of image %s version %d failed: %s; the version stays in maintenance: run bootfleet image commit %s again", v.Image, v.Version, w.Commit.Error, v.Image)
		}
		select {
		case <-ctx.Done():
			return w, fmt.Errorf("stopped waiting at %d of %d bytes; the server finishes the commit, see bootfleet image versions %s: %w", w.Commit.Done, w.Commit.Total, v.Image, ctx.Err())
		case <-tick.C:
		}
	}
}
