package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
)

func machinePowerCmd(o *clientOpts) *cobra.Command {
	var (
		in                         api.PowerSettings
		passwordFile, secureOnFile string
		clear                      bool
	)
	cmd := &cobra.Command{
		Use:   "power MAC|NAME [--driver wol|ipmi|redfish|none] [--host H] [--user U] [--password-file F] [--cipher-suite N] [--broadcast A] [--secureon-file F] [--clear]",
		Short: "Show or set how bootfleet powers a machine (its power driver)",
		Long: `Without flags, show the machine's power settings; secrets show as (set).
With flags, replace them (needs an admin token). Passwords are read from a
file, never from the command line, where other users can see them; a
password not given stays as stored. --clear goes back to the default,
Wake-on-LAN on the server's interface.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			path := "/machines/" + pathKey(args[0]) + "/power"
			var got api.PowerSettings
			switch {
			case clear:
				if err := c.do(cmd.Context(), "DELETE", path, nil, nil); err != nil {
					return err
				}
				if err := c.do(cmd.Context(), "GET", path, nil, &got); err != nil {
					return err
				}
			case !anyChanged(cmd, "driver", "host", "user", "password-file", "cipher-suite", "insecure", "broadcast", "secureon-file"):
				if err := c.do(cmd.Context(), "GET", path, nil, &got); err != nil {
					return err
				}
			default:
				if in.Password, err = secretFile("password-file", passwordFile); err != nil {
					return err
				}
				if in.SecureOn, err = secretFile("secureon-file", secureOnFile); err != nil {
					return err
				}
				if err := c.do(cmd.Context(), "PUT", path, in, &got); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if o.output == "json" {
				return printJSON(w, got)
			}
			return keyValues(w, [][2]string{{"driver", got.Driver}, {"host", orDash(got.Host)}, {"user", orDash(got.User)},
				{"password", orDash(deref(got.Password))}, {"cipher suite", orDash(nonZero(got.CipherSuite))},
				{"broadcast", orDash(got.Broadcast)}, {"secureon", orDash(deref(got.SecureOn))}, {"source", orDash(got.Source)}})
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.Driver, "driver", "wol", "wol, ipmi, redfish or none")
	f.StringVar(&in.Host, "host", "", "the BMC's host or host:port (ipmi, redfish)")
	f.StringVar(&in.User, "user", "", "the BMC user (ipmi, redfish)")
	f.StringVar(&passwordFile, "password-file", "", "file holding the BMC password (- for stdin)")
	f.IntVar(&in.CipherSuite, "cipher-suite", 0, "IPMI cipher suite 0..17 (default 17)")
	f.BoolVar(&in.Insecure, "insecure", false, "redfish: accept the BMC's self-signed certificate")
	f.StringVar(&in.Broadcast, "broadcast", "", "wol: a subnet-directed broadcast address for a routed network, e.g. 10.1.2.255")
	f.StringVar(&secureOnFile, "secureon-file", "", "wol: file holding the NIC's SecureOn password, 11:22:33:44:55:66")
	f.BoolVar(&clear, "clear", false, "forget the settings: back to Wake-on-LAN")
	return cmd
}

// anyChanged reports whether any of the flags was given: the shared ones
// (--server, -o) do not make a show into a change.
func anyChanged(cmd *cobra.Command, flags ...string) bool {
	for _, f := range flags {
		if cmd.Flags().Changed(f) {
			return true
		}
	}
	return false
}

// secretFile reads a secret from file (or stdin for -); "" means none
// given, which keeps the stored one.
func secretFile(flag, file string) (*string, error) {
	if file == "" {
		return nil, nil
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(os.Stdin, 4096))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	return &s, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}
