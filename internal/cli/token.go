package cli

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func tokenCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke API tokens with scopes read, operate or admin (needs an admin token)",
	}
	o.register(cmd)
	cmd.AddCommand(tokenCreateCmd(o), tokenListCmd(o), tokenRevokeCmd(o))
	return cmd
}

func tokenCreateCmd(o *clientOpts) *cobra.Command {
	var scope string
	cmd := &cobra.Command{
		Use:   "create NAME --scope read|operate|admin",
		Short: "Make a token; its secret is printed once and cannot be shown again",
		Long: `Make a token. read lists and shows; operate also sets a machine's profile
and resets its overlay; admin does everything (machines, profiles, images,
tokens, the audit trail). The server keeps only the secret's SHA-256, so
the secret printed here is the only copy: give it to its user now.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch scope {
			case "read", "operate", "admin":
			default:
				return fmt.Errorf("--scope: want read, operate or admin, got %q", scope)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var got api.Token
			if err := c.do(cmd.Context(), "POST", "/tokens", api.Token{Name: args[0], Scope: scope}, &got); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), got)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "token %s created with scope %s; its secret, shown only now:\n%s\n", got.Name, got.Scope, got.Secret)
			return nil
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "", "read, operate or admin (required)")
	cmd.MarkFlagRequired("scope")
	return cmd
}

func tokenListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List tokens by name (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var tl api.TokenList
			if err := c.do(cmd.Context(), "GET", "/tokens", nil, &tl); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), tl.Tokens)
			}
			rows := make([][]string, 0, len(tl.Tokens))
			for _, t := range tl.Tokens {
				created := formatTime(&t.Created)
				if t.Name == api.FileTokenName {
					created = "(file in the data directory)"
				}
				rows = append(rows, []string{t.Name, t.Scope, created})
			}
			return table(cmd.OutOrStdout(), []string{"NAME", "SCOPE", "CREATED"}, rows)
		},
	}
}

func tokenRevokeCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token; requests with it fail from now on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/tokens/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", args[0])
			return nil
		},
	}
}

func auditCmd() *cobra.Command {
	o := &clientOpts{}
	var since string
	var limit int
	cmd := &cobra.Command{
		Use:   "audit [--since 24h|TIME] [--limit N]",
		Short: "Show the audit trail: every change asked of the API, who asked, from where (needs an admin token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if err := sinceLimit(q, since, limit); err != nil {
				return err
			}
			var al api.AuditList
			if err := c.do(cmd.Context(), "GET", withQuery("/audit", q), nil, &al); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), al.Entries)
			}
			rows := make([][]string, 0, len(al.Entries))
			for _, e := range al.Entries {
				rows = append(rows, []string{e.Time.UTC().Format(time.DateTime), e.Token, e.Remote, e.Route,
					orDash(e.Target), fmt.Sprint(e.Status), orDash(e.Summary)})
			}
			return table(cmd.OutOrStdout(), []string{"TIME (UTC)", "TOKEN", "FROM", "ROUTE", "TARGET", "STATUS", "SUMMARY"}, rows)
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&since, "since", "", "only entries newer than a duration (24h) or an RFC 3339 time")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries, newest first (default 100, at most 1000)")
	return cmd
}
