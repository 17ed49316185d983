package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

func profileCmd() *cobra.Command {
	o := &clientOpts{}
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Add, list, show and remove boot profiles (through the API of a running server)",
	}
	o.register(cmd)
	cmd.AddCommand(profileAddCmd(o), profileSetCmd(o), profileListCmd(o), profileShowCmd(o), profileRmCmd(o))
	return cmd
}

func profileAddCmd(o *clientOpts) *cobra.Command {
	var p api.Profile
	var arm inventory.ArchBoot
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "add NAME --kernel PATH|URL [--initrd PATH|URL]... [--cmdline TEMPLATE] [--root-image IMAGE [--overlay MODE] [--root-kernel image]] [--var K=V]... [--file PATH[:MODE[:OWNER]]=@TEMPLATE_FILE]...",
		Short: "Add a profile",
		Long: `Add a profile: what the machines given it boot.

With --root-image the machine's root is that image over NBD. With
--root-kernel image as well, it boots the newest kernel in the image's /boot
(give no --kernel or --initrd): the server builds the initramfs from the
image's own modules at the first boot of each image version, so importing a
new version of the image brings its kernel along.

--kernel and --initrd are what x86_64 machines boot; --arm64-kernel and
--arm64-initrd what arm64 machines boot. Give either or both: a machine
whose profile has no kernel for its architecture gets no boot file.

--file writes a file into the root of each of its machines at every boot,
rendered from a Go template that sees .Name .MAC .IP .Profile and
.Vars.KEY (--var; a machine's own vars win). A template that does not
parse or uses a variable no one sets is refused now.`,
		Example: `  bootfleet profile add linux --kernel /srv/vmlinuz --initrd /srv/initrd.img --cmdline 'console=ttyS0'
  bootfleet profile add lab --root-image debian --root-kernel image --cmdline 'console=ttyS0'
  bootfleet profile add kiosk --root-image debian --root-kernel image --var url=https://intranet/ --file /etc/kiosk.url:0644=@kiosk.tmpl
  bootfleet profile add mixed --loader grub --kernel /srv/amd64/vmlinuz --arm64-kernel /srv/arm64/vmlinuz --cmdline 'console=ttyS0 console=ttyAMA0'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if arm.Kernel != "" || len(arm.Initrd) > 0 {
				p.ARM64 = &arm
			}
			if p.Kernel == "" && arm.Kernel == "" && p.RootKernel == "" {
				return fmt.Errorf("--kernel PATH|URL (x86_64) or --arm64-kernel PATH|URL is required, or --root-image IMAGE --root-kernel image to boot the kernel the image holds")
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			p.Name = args[0]
			if p.Files, p.Vars, err = ff.apply(nil, nil); err != nil {
				return err
			}
			var got api.Profile
			if err := c.do(cmd.Context(), "POST", "/profiles", p, &got); err != nil {
				return err
			}
			return o.printProfile(cmd, got, "added")
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Kernel, "kernel", "", "kernel: a local path or http(s) URL (required unless --root-kernel image)")
	f.StringArrayVar(&p.Initrd, "initrd", nil, "initrd: a local path or http(s) URL (repeatable, in order)")
	f.StringVar(&arm.Kernel, "arm64-kernel", "", "the kernel arm64 machines boot: a local path or http(s) URL")
	f.StringArrayVar(&arm.Initrd, "arm64-initrd", nil, "an initrd of arm64 machines (repeatable, in order)")
	f.StringVar(&p.Cmdline, "cmdline", "", "kernel command line template, e.g. 'console=ttyS0 host={{.Name}}'")
	f.StringVar(&p.RootImage, "root-image", "", "diskless root: an imported image, served over NBD (adds bootfleet.root= to the command line)")
	f.StringVar(&p.Overlay, "overlay", "", "with --root-image: ephemeral (default), persistent or none, kept by the server; client-ram or client-disk, kept by the machine (client-disk needs bootfleet.cache= in --cmdline)")
	f.StringVar(&p.Loader, "loader", "", "what UEFI x64 firmware loads: ipxe (default) or grub, the server's signed shim and grub (Secure Boot)")
	f.StringVar(&p.RootKernel, "root-kernel", "", "with --root-image: image boots the kernel in the image, with an initramfs built from it (no --kernel or --initrd)")
	f.StringVar(&p.RootChannel, "root-channel", "", "with --root-image: which version the machines boot: production (default), test (the newest in test or production), or a version number to pin")
	ff.register(f, false)
	return cmd
}

func profileSetCmd(o *clientOpts) *cobra.Command {
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "set NAME [--var K=V]... [--unvar K]... [--file PATH[:MODE[:OWNER]]=@TEMPLATE_FILE]... [--unfile PATH]...",
		Short: "Change the files and vars a profile gives its machines",
		Example: `  bootfleet profile set lab --var room=B12 --file /etc/motd=@motd.tmpl
  bootfleet profile set lab --unfile /etc/motd --unvar room`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !ff.changed() {
				return errNoChange
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			var p api.Profile
			if err := c.do(cmd.Context(), "GET", "/profiles/"+pathKey(args[0]), nil, &p); err != nil {
				return err
			}
			if p.Files, p.Vars, err = ff.apply(p.Files, p.Vars); err != nil {
				return err
			}
			var got api.Profile
			if err := c.do(cmd.Context(), "PUT", "/profiles/"+pathKey(args[0]), p, &got); err != nil {
				return err
			}
			return o.printProfile(cmd, got, "updated")
		},
	}
	ff.register(cmd.Flags(), true)
	return cmd
}

func profileListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var pl api.ProfileList
			if err := c.do(cmd.Context(), "GET", "/profiles", nil, &pl); err != nil {
				return err
			}
			if o.output == "json" {
				return printJSON(cmd.OutOrStdout(), pl.Profiles)
			}
			rows := make([][]string, 0, len(pl.Profiles))
			for _, p := range pl.Profiles {
				rows = append(rows, []string{p.Name, kernelOf(p), orDash(strings.Join(p.Initrd, ",")), orDash(p.Cmdline), p.Source})
			}
			return table(cmd.OutOrStdout(), []string{"NAME", "KERNEL", "INITRD", "CMDLINE", "SOURCE"}, rows)
		},
	}
}

func profileShowCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show one profile",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var p api.Profile
			if err := c.do(cmd.Context(), "GET", "/profiles/"+pathKey(args[0]), nil, &p); err != nil {
				return err
			}
			return o.printProfile(cmd, p, "")
		},
	}
}

func (o *clientOpts) printProfile(cmd *cobra.Command, p api.Profile, verb string) error {
	w := cmd.OutOrStdout()
	if o.output == "json" {
		return printJSON(w, p)
	}
	if verb != "" {
		fmt.Fprintf(w, "%s profile %s\n", verb, p.Name)
	}
	kv := [][2]string{{"name", p.Name}, {"kernel", kernelOf(p)}}
	for i, rd := range p.Initrd {
		kv = append(kv, [2]string{fmt.Sprintf("initrd[%d]", i), rd})
	}
	if p.ARM64 != nil {
		kv = append(kv, [2]string{"arm64 kernel", orDash(p.ARM64.Kernel)})
		for i, rd := range p.ARM64.Initrd {
			kv = append(kv, [2]string{fmt.Sprintf("arm64 initrd[%d]", i), rd})
		}
	}
	kv = append(kv, [2]string{"cmdline", orDash(p.Cmdline)})
	if p.RootImage != "" {
		kv = append(kv, [2]string{"root image", p.RootImage}, [2]string{"overlay", p.Overlay})
	}
	if p.RootKernel != "" {
		kv = append(kv, [2]string{"root kernel", p.RootKernel})
	}
	if p.RootChannel != "" {
		kv = append(kv, [2]string{"root channel", p.RootChannel})
	}
	if p.Loader != "" {
		kv = append(kv, [2]string{"loader", p.Loader})
	}
	kv = append(kv, fileRows(p.Files, p.Vars)...)
	kv = append(kv, [2]string{"source", p.Source})
	return keyValues(w, kv)
}

// kernelOf says what a profile boots: its kernel, or its root image's.
func kernelOf(p api.Profile) string {
	if p.Kernel == "" && p.RootKernel == "image" {
		return "(from image " + p.RootImage + ")"
	}
	return orDash(p.Kernel)
}

func profileRmCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a profile no machine uses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", "/profiles/"+pathKey(args[0]), nil, nil); err != nil {
				return err
			}
			if o.output != "json" {
				fmt.Fprintf(cmd.OutOrStdout(), "removed profile %s\n", args[0])
			}
			return nil
		},
	}
}
