// Package httpboot is bootfleet's HTTP boot service: per-machine iPXE
// scripts, the profiles' kernels and initrds, the files of the served roots,
// and the DoneURL that a booted OS calls to report boot complete.
//
// Routes:
//
//	GET /ipxe/{mac}                          iPXE script (MAC as 52-54-00-12-34-56 or with colons)
//	GET /profiles/{name}/kernel              the profile's kernel (local path)
//	GET /profiles/{name}/initrd/{i}/{base}   the profile's i-th initrd (local path)
//	GET /images/{sha256}/vmlinuz             kernel of root image content (root.kernel: image)
//	GET /images/{sha256}/initrd.img          initramfs built from that content
//	GET /files/{path...}                     files from the iPXE dir and tftp.root
//	GET|POST /done/{mac}                     boot complete
//
// The script of a profile with root.kernel: image names the sha256 its NBD
// export serves, so kernel, modules and root always come from one image
// version; the files are built at the first request (ImageKernels).
//
// Machines whose profile has loader: grub get a grub config instead of a
// script (package grub renders it): /grub/grub.cfg for every machine,
// then /grub/MAC/grub.cfg, naming the profile's files by path. Debian's
// signed grub fetches over TFTP only, so GrubTFTP serves the same paths
// to the TFTP server.
//
// arm64 machines that UEFI HTTP Boot get /grub/MAC/arm64/disk.img
// instead: a FAT image (package fatimg) the firmware boots from a RAM
// disk, holding shim, Debian's non-network grubaa64, the machine's
// grub.cfg and its profile's arm64 kernel and initrds, assembled per
// machine as it is sent.
//
// Files are served with http.ServeContent, so HEAD, Range and conditional
// requests work, and the bytes go out with sendfile.
package httpboot
