package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/imagestore"
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
	var out, kernelOut, image string
	var extra, nics []string
	co := &clientOpts{output: "table"}
	cmd := &cobra.Command{
		Use:   "build --kernel-deb FILE | --modules-dir DIR | --image NAME --out FILE",
		Short: "Build an initramfs that mounts the root file system from bootfleet over NBD",
		Long: `Build an xz'd cpio initramfs for diskless clients: the static bootfleet-agent
as /init, static busybox, and the kernel modules it needs (nbd, ext4, the
NIC drivers and their dependencies) from a stock Debian kernel package, with
those of client-side write caches (dm_snapshot, brd, virtio_blk, nvme) where
the kernel has them; a SATA cache disk needs --modules ahci,sd_mod. Nothing
else: the root's other modules come from its own /lib/modules.

--nic-drivers chooses the NIC drivers; the agent loads them all before DHCP.
The default is the common wired and virtual NICs:
  ` + strings.Join(initramfs.DefaultNICDrivers, ",") + `
"default,ice,mlx5_core" adds to them, "e1000e,igb" replaces them (a smaller
initramfs, for a fleet whose NICs you know), and "none" includes none, for
a kernel with its NIC driver built in. A driver the kernel lacks is left
out with a warning. The server's nbd.nic_drivers is the same list for the
initramfs it builds for root.kernel: image.

The agent takes DHCP on the first Ethernet NIC, attaches /dev/nbd0 to the
export named by bootfleet.root=nbd:HOST:PORT:EXPORT on the kernel command
line (bootfleet's iPXE script adds it for profiles with a root image), mounts
it and switches to it.

With --image, the kernel and its modules come from the image itself (its
/boot/vmlinuz-VERSION and /lib/modules/VERSION), so the machine runs the
kernel its root was built for, with every module of that kernel at hand;
run it again after importing a new version of the image (or give the
profile root.kernel: image, and the server builds and serves these files
itself for each image version it boots). NAME is an image
imported on this server (read from its data directory, --data), or the
path of a raw image file. It mounts the image's root read-only, so it runs
as root on the server.

By default the agent is the bootfleet-agent file next to the bootfleet
binary; build it with: CGO_ENABLED=0 go build -o bootfleet-agent ./cmd/bootfleet-agent`,
		Example: `  bootfleet initramfs build --kernel-deb linux-image-6.1.0-28-amd64_6.1.119-1_amd64.deb \
      --out /srv/bootfleet/initrd-nbd.img --kernel-out /srv/bootfleet/vmlinuz
  bootfleet initramfs build --image debian --out /srv/bootfleet/debian-initrd.img --kernel-out /srv/bootfleet/debian-vmlinuz`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out FILE is required")
			}
			if kernelOut != "" && o.KernelDeb == "" && image == "" {
				return fmt.Errorf("--kernel-out needs --kernel-deb or --image: the kernel comes from the package or the image")
			}
			if image != "" {
				path, err := co.imageFile(cmd.Context(), image)
				if err != nil {
					return err
				}
				o.Image = path
			}
			if o.Agent == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find the bootfleet binary to look for bootfleet-agent next to it: %w; give --agent", err)
				}
				o.Agent = filepath.Join(filepath.Dir(self), "bootfleet-agent")
			}
			var err error
			if o.NICDrivers, err = initramfs.ParseNICDrivers(nics); err != nil {
				return fmt.Errorf("--nic-drivers: %w", err)
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
	f.StringVar(&image, "image", "", "or: take kernel and modules from this imported image (NAME) or raw image file")
	f.StringVar(&co.server, "server", "", "with --image NAME: API server URL (default $BOOTFLEET_SERVER or "+defaultServer+")")
	f.StringVar(&co.token, "token", "", "with --image NAME: API token (default $BOOTFLEET_TOKEN or the api-token file in --data)")
	f.StringVar(&co.data, "data", defaultData, "with --image NAME: the server's data directory, where the image is stored")
	f.StringVar(&out, "out", "", "initramfs file to write")
	f.StringVar(&kernelOut, "kernel-out", "", "also write the package's vmlinuz here (with --kernel-deb)")
	f.StringVar(&o.Agent, "agent", "", "static bootfleet-agent binary (default: bootfleet-agent next to this binary)")
	f.StringVar(&o.Busybox, "busybox", "/bin/busybox", "static busybox (Debian package busybox-static)")
	f.StringSliceVar(&extra, "modules", nil, "extra modules to load, e.g. ahci,sd_mod for a SATA cache disk (nbd and ext4 are always in)")
	f.StringSliceVar(&nics, "nic-drivers", nil, "NIC drivers to include: NAME,..., default (the common ones), default,NAME,... or none")
	f.StringVar(&o.Compression, "compression", "", "xz (default; gzip where xz is missing) or gzip")
	return cmd
}

// imageFile is the stored file of the image named name, or name itself
// when it is a file's path.
func (o *clientOpts) imageFile(ctx context.Context, name string) (string, error) {
	if st, err := os.Stat(name); err == nil && st.Mode().IsRegular() {
		return name, nil
	}
	c, err := o.client()
	if err != nil {
		return "", err
	}
	var img api.Image
	if err := c.do(ctx, "GET", "/images/"+pathKey(name), nil, &img); err != nil {
		return "", fmt.Errorf("--image %s: not a file here, and the server has no such image: %w", name, err)
	}
	store, err := imagestore.Open(o.data)
	if err != nil {
		return "", err
	}
	path, err := store.Path(img.SHA256)
	if err != nil {
		return "", err
	}
	if !store.Has(img.SHA256) {
		return "", fmt.Errorf("--image %s: stored as sha256 %s, but %s is not here; run this on the server, with --data set to its data directory", name, img.SHA256, path)
	}
	return path, nil
}
