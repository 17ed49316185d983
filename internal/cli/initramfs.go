package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/initramfs"
)

func initramfsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "initramfs",
		Short: "Client initramfs for diskless root on bootfleet's NBD server",
	}
	cmd.AddCommand(initramfsBuildCmd())
	return cmd
}

func initramfsBuildCmd() *cobra.Command {
	var o initramfs.Options
	var out, kernelOut string
	var extra []string
	cmd := &cobra.Command{
		Use:   "build --kernel-deb FILE | --modules-dir DIR --out FILE",
		Short: "Build an initramfs that mounts the root file system from bootfleet over NBD",
		Long: `Build a gzip'd cpio initramfs for diskless clients: the static bootfleet-agent
as /init, static busybox, and the kernel modules it needs (virtio NIC, nbd,
ext4 and their dependencies) from a stock Debian kernel package.

The agent takes DHCP on the first Ethernet NIC, attaches /dev/nbd0 to the
export named by bootfleet.root=nbd:HOST:PORT:EXPORT on the kernel command
line (bootfleet's iPXE script adds it for profiles with a root image), mounts
it and switches to it.

By default the agent is the bootfleet-agent file next to the bootfleet
binary; build it with: CGO_ENABLED=0 go build -o bootfleet-agent ./cmd/bootfleet-agent`,
		Example: `  bootfleet initramfs build --kernel-deb linux-image-6.1.0-28-amd64_6.1.119-1_amd64.deb \
      --out /srv/bootfleet/initrd-nbd.img --kernel-out /srv/bootfleet/vmlinuz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out FILE is required")
			}
			if kernelOut != "" && o.KernelDeb == "" {
				return fmt.Errorf("--kernel-out needs --kernel-deb: the kernel image comes from the package")
			}
			if o.Agent == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find the bootfleet binary to look for bootfleet-agent next to it: %w; give --agent", err)
				}
				o.Agent = filepath.Join(filepath.Dir(self), "bootfleet-agent")
			}
			if len(extra) > 0 {
				o.Modules = append(append([]string(nil), initramfs.DefaultModules...), extra...)
			}
			o.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			tmp, err := os.CreateTemp(filepath.Dir(out), ".initramfs-*")
			if err != nil {
				return fmt.Errorf("create the output next to %s: %w", out, err)
			}
			defer os.Remove(tmp.Name())
			res, err := initramfs.Build(tmp, o)
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := os.Chmod(tmp.Name(), 0o644); err != nil {
				return err
			}
			if err := os.Rename(tmp.Name(), out); err != nil {
				return err
			}
			if kernelOut != "" {
				if err := os.WriteFile(kernelOut, res.Vmlinuz, 0o644); err != nil {
					return fmt.Errorf("write --kernel-out: %w", err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: kernel %s, modules %s\n", out, res.KernelVersion, strings.Join(res.Modules, " "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.KernelDeb, "kernel-deb", "", "Debian linux-image-VERSION .deb to take modules (and --kernel-out) from")
	f.StringVar(&o.ModulesDir, "modules-dir", "", "or: a lib/modules/VERSION directory")
	f.StringVar(&out, "out", "", "initramfs file to write")
	f.StringVar(&kernelOut, "kernel-out", "", "also write the package's vmlinuz here (with --kernel-deb)")
	f.StringVar(&o.Agent, "agent", "", "static bootfleet-agent binary (default: bootfleet-agent next to this binary)")
	f.StringVar(&o.Busybox, "busybox", "/bin/busybox", "static busybox (Debian package busybox-static)")
	f.StringSliceVar(&extra, "modules", nil, "extra modules to load, e.g. e1000e,igb,r8169 for real NICs (virtio_net, nbd and ext4 are always in)")
	return cmd
}
