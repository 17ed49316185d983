package cli

import (
	"fmt"
	"net/url"

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
tokens). The server keeps only the secret's SHA-256, so
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
