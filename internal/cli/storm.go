package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/storm"
)

func stormCmd() *cobra.Command {
	var (
		cfg         storm.Config
		firmware    string
		output      string
		traceFile   string
		sizeProbe   bool
		realProfile string
		wave        string
		cpuProfile  string
		conn        clientOpts
	)
	cmd := &cobra.Command{
		Use:   "storm --interface IFACE --clients N --firmware uefi|bios|ipxe",
		Short: "Boot N emulated machines at once from the network on IFACE and time every phase",
		Long: `storm boots N emulated machines from whatever server answers on IFACE, each
speaking the protocols in the order its firmware does: DHCP from its own MAC,
TFTP of the NBP (uefi, bios), DHCP again as iPXE, HTTP of its iPXE script and
every file it names, a replay of an NBD read trace when the kernel command
line names a diskless root, and a GET of its DoneURL. Each machine adds its
leased address to IFACE for the run and removes it at the end. Needs root.

It prints a progress bar on stderr, then a table of each phase's p50, p99 and
max, the bytes moved and the link's use; -o json prints one entry per machine
instead. It exits non-zero when a machine failed.

With --real PROFILE it emulates nothing: it powers on the real machines of
PROFILE through their power drivers (as bootfleet power on --profile, with
--wave), follows their boot records on the server until each has ended or
--timeout has passed, and prints the same table, timed from each machine's
power-on. It needs an operate token (--server, --token, as the other API
commands) and no --interface.

With --cpu-profile FILE it writes a Go CPU profile of the whole emulated
run to FILE (go tool pprof reads it), also when machines fail: a storm of
hundreds of machines on a few CPUs can be bound by the simulator rather
than by the server or the link, and the profile shows where its CPU went.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if realProfile != "" {
				if cpuProfile != "" {
					return fmt.Errorf("--cpu-profile profiles the emulated machines, and --real emulates none: leave one out")
				}
				return runRealStorm(cmd, &conn, realProfile, wave, cfg.Timeout, output)
			}
			if cpuProfile != "" {
				stop, perr := startCPUProfile(cpuProfile)
				if perr != nil {
					return perr
				}
				defer func() { err = errors.Join(err, stop()) }()
			}
			if cfg.Interface == "" {
				return fmt.Errorf("--interface is required, or --real PROFILE to power on real machines")
			}
			fw, err := storm.ParseFirmware(firmware)
			if err != nil {
				return err
			}
			cfg.Firmware = fw
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %q: want table or json", output)
			}
			// Unset TFTP flags take the firmware's defaults.
			def := storm.DefaultTFTP(fw)
			f := cmd.Flags()
			if !f.Changed("tftp-blksize") {
				cfg.TFTP.BlockSize = def.BlockSize
			}
			if !f.Changed("tftp-windowsize") {
				cfg.TFTP.WindowSize = def.WindowSize
			}
			cfg.TFTP.SizeProbe = def.SizeProbe
			if f.Changed("tftp-size-probe") {
				cfg.TFTP.SizeProbe = sizeProbe
			}
			if traceFile != "" {
				fh, err := os.Open(traceFile)
				if err != nil {
					return fmt.Errorf("--trace: %w", err)
				}
				cfg.Trace, err = storm.ParseTrace(fh)
				fh.Close()
				if err != nil {
					return fmt.Errorf("--trace %s: %w", traceFile, err)
				}
			}
			// On a terminal the bar is enough while it runs (the table
			// lists the failures); in a log every failure gets its line.
			stderr := cmd.ErrOrStderr()
			tty := isTerminal(stderr)
			if !tty {
				cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			}
			cfg.Progress = storm.ProgressPrinter(stderr, tty, 5*time.Second)
			rep, err := storm.Run(cmd.Context(), cfg)
			if rep == nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				if perr := printJSON(out, rep); perr != nil {
					return perr
				}
			} else if perr := storm.WriteTable(out, rep); perr != nil {
				return perr
			}
			if err != nil {
				return fmt.Errorf("storm interrupted: %w", err)
			}
			if rep.Summary.Failed > 0 {
				return fmt.Errorf("%d of %d machines failed", rep.Summary.Failed, rep.Clients)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Interface, "interface", "i", "", "network interface the machines boot from (required without --real)")
	f.IntVarP(&cfg.Clients, "clients", "n", 1, "number of machines, 1..65535")
	f.StringVar(&firmware, "firmware", "uefi", "firmware the machines play: uefi (OVMF), bios (PXE ROM) or ipxe (iPXE in ROM)")
	f.DurationVar(&cfg.Ramp, "ramp", 0, "spread the power-ons evenly over this time (0: all at once)")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "per machine, power-on to DoneURL")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.StringVar(&cfg.MACPrefix, "mac-prefix", storm.DefaultMACPrefix, "first 1-5 octets of every MAC (locally administered); machine i gets the prefix then i+1")
	f.IntVar(&cfg.TFTP.BlockSize, "tftp-blksize", 0, "TFTP blksize to ask, 8..65464, 0 for none (default: uefi 1468, bios 1432)")
	f.IntVar(&cfg.TFTP.WindowSize, "tftp-windowsize", 0, "TFTP windowsize to ask, 0 for none: lockstep (default: uefi 4, bios none)")
	f.BoolVar(&sizeProbe, "tftp-size-probe", false, "ask tsize in an RRQ of its own before the download, as EDK II does (default: uefi true, bios false)")
	f.DurationVar(&cfg.TFTP.Timeout, "tftp-timeout", 4*time.Second, "wait for a TFTP packet before resending")
	f.IntVar(&cfg.TFTP.Tries, "tftp-tries", 6, "times a TFTP packet is sent before the machine gives up")
	f.DurationVar(&cfg.DHCP.Timeout, "dhcp-timeout", 0, "first DHCP retransmission timeout, doubling after (default: uefi and bios 4s, ipxe 1s)")
	f.IntVar(&cfg.DHCP.Tries, "dhcp-tries", 4, "DISCOVERs (and REQUESTs) before the machine gives up")
	f.DurationVar(&cfg.DHCP.OfferWait, "offer-wait", 2*time.Second, "how long to wait for a ProxyDHCP offer after an address offer without a boot file")
	f.StringVar(&traceFile, "trace", "", "NBD read trace to replay for a diskless root (default: the committed Debian 12 boot)")
	f.IntVar(&cfg.NBDDepth, "nbd-depth", 8, "NBD reads in flight per machine")
	f.Int64Var(&cfg.RAM, "ram", storm.DefaultRAM, "each machine's emulated RAM in bytes; the agent's root proxy caches 10% of it")
	f.StringVar(&cfg.DoneParam, "done-param", "done", "kernel command line parameter that holds the DoneURL")
	f.StringVar(&realProfile, "real", "", "power on the real machines of this profile through their drivers instead of emulating any")
	f.StringVar(&wave, "wave", "", "with --real: N/T, N machines every T (default: all at once)")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to this file, to see where the simulator's CPU goes (go tool pprof reads it)")
	conn.connFlags(f.StringVar)
	cmd.AddCommand(stormRecordCmd())
	return cmd
}

func stormRecordCmd() *cobra.Command {
	var (
		cfg    storm.RecordConfig
		client string
		out    string
	)
	cmd := &cobra.Command{
		Use:   "record --interface IFACE --out FILE",
		Short: "Record the NBD reads of machines booting now into a trace for storm to replay",
		Long: `record captures, on the NBD server's interface, what NBD clients send to the
server (it does not stand in the connection: the server and the machines'
command lines stay as they are), and writes each NBD_CMD_READ's offset and
length to FILE in the order sent. Start it, boot one machine from the image
to trace (its connection must start after the recording does), and stop it
with Ctrl-C once the machine is up, or let --idle stop it. Needs root.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client != "" {
				a, err := netip.ParseAddr(client)
				if err != nil || !a.Is4() {
					return fmt.Errorf("--client %q: want an IPv4 address", client)
				}
				cfg.Client = a
			}
			stderr := cmd.ErrOrStderr()
			cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))
			fmt.Fprintf(stderr, "recording NBD reads to port %d on %s; boot the machine, then Ctrl-C\n", cfg.Port, cfg.Interface)
			tr, st, err := storm.Record(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if len(tr.Reads) == 0 {
				return fmt.Errorf("no NBD reads seen on %s port %d (%d sessions, %d open before the recording); nothing written to %s", cfg.Interface, cfg.Port, st.Sessions, st.Ignored, out)
			}
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			err = storm.WriteTrace(f, tr,
				fmt.Sprintf("recorded by bootfleet storm record on %s port %d, %s", cfg.Interface, cfg.Port, time.Now().UTC().Format(time.RFC3339)),
				fmt.Sprintf("%d sessions, %d reads, %d bytes; %d writes not replayed", st.Sessions, len(tr.Reads), tr.Bytes(), st.Writes))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d reads, %d bytes from %d sessions\n", out, len(tr.Reads), tr.Bytes(), st.Sessions)
			if st.Broken > 0 {
				return fmt.Errorf("%d sessions could not be followed to their end (the capture lost packets); the trace in %s is short of them", st.Broken, out)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&cfg.Interface, "interface", "i", "", "the NBD server's interface on the boot network (required)")
	f.IntVar(&cfg.Port, "port", 10809, "the NBD server's TCP port")
	f.StringVar(&client, "client", "", "record only connections from this IPv4 address")
	f.DurationVar(&cfg.Idle, "idle", 0, "stop once no read has come for this long (0: only Ctrl-C)")
	f.StringVarP(&out, "out", "o", "", "trace file to write (required)")
	cmd.MarkFlagRequired("interface")
	cmd.MarkFlagRequired("out")
	return cmd
}

// startCPUProfile starts a CPU profile of this process into path; stop
// ends it and closes the file, so the profile is whole however the storm
// ended.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpu-profile %s: %w", path, err)
		}
		return nil
	}, nil
}

// isTerminal reports whether w is a character device (a terminal), where
// a progress bar can redraw itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
