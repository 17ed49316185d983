package httpboot

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/ipxe"
)

// UKIs builds and keeps unified kernel images of a kernel and its initrds
// (local files). *ukicache.Cache implements it.
type UKIs interface {
	// Size is the image's size, without building it.
	Size(kernel string, initrds []string) (int64, error)
	// Open opens the image, building it first if need be.
	Open(kernel string, initrds []string) (*os.File, error)
}

// ukiFile is the UKI's name beside a profile's or an image's kernel, over
// HTTP and TFTP alike, so iPXE's fallback from mtftp:// to plain TFTP of
// the same path gets the same bytes.
const ukiFile = "boot.efi"

// ukiInputs are the local files of a UKI: the kernel and its initrds, or
// ok false when there are none to build one from.
type ukiInputs func() (kernel string, initrds []string, ok bool)

// mtftp puts mtftp://ServerIP/DIR/FILE ahead of the kernel's URLs, which
// stay as its fallback, when the group is that path's. FILE is the UKI
// (boot.efi, for UEFI clients, in place of kernel and initrds) when
// there is one and the group takes it, else kernelName alone: the group
// carries one file at a time, and iPXE fetches kernel and initrds one
// after the other, so only a UKI puts a whole boot on it.
func (s *server) mtftp(b ipxe.Boot, mac net.HardwareAddr, dir, kernelName string, kernelSize int64, in ukiInputs) ipxe.Boot {
	if s.MTFTP == nil || s.Groups != nil && !s.Groups.Delivers(mac) {
		return b
	}
	if s.UKIs != nil {
		if kernel, initrds, ok := in(); ok {
			n, err := s.UKIs.Size(kernel, initrds)
			if err != nil {
				s.log.Warn("no unified kernel image: the kernel alone goes by mtftp", "kernel", kernel, "err", err)
			} else if s.MTFTP.Grant(dir+"/"+ukiFile, n) {
				b.UKI = "mtftp://" + s.ServerIP + "/" + dir + "/" + ukiFile
				// Build it now, while iPXE reads the script.
				go s.warmUKI(kernel, initrds)
				return b
			}
		}
	}
	if !s.MTFTP.Grant(dir+"/"+kernelName, kernelSize) {
		return b
	}
	b.Kernel, b.KernelAlt = "mtftp://"+s.ServerIP+"/"+dir+"/"+kernelName, append([]string{b.Kernel}, b.KernelAlt...)
	return b
}

func (s *server) warmUKI(kernel string, initrds []string) {
	f, err := s.UKIs.Open(kernel, initrds)
	if err != nil {
		s.log.Error("build unified kernel image", "kernel", kernel, "err", err)
		return
	}
	f.Close()
}

// localUKI is the UKI inputs of a profile's x86_64 files: only when the
// kernel and every initrd are local files.
func localUKI(files inventory.ArchBoot) ukiInputs {
	return func() (string, []string, bool) {
		if isURL(files.Kernel) {
			return "", nil, false
		}
		for _, rd := range files.Initrd {
			if isURL(rd) {
				return "", nil, false
			}
		}
		return files.Kernel, files.Initrd, true
	}
}

// imageUKI is the UKI inputs of content sha's built kernel and initrd;
// none while the build runs (a script must not wait for it), unless wait.
func (s *server) imageUKI(ctx context.Context, sha string, wait bool) ukiInputs {
	return func() (string, []string, bool) {
		if !wait {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			cancel()
		}
		var names []string
		for _, file := range []string{kernelFile, initrdFile} {
			f, err := s.Kernels.Open(ctx, sha, file)
			if err != nil {
				return "", nil, false
			}
			names = append(names, f.Name())
			f.Close()
		}
		return names[0], names[1:], true
	}
}

// openUKI opens the UKI of a profile's x86_64 files (sha empty) or of
// content sha's kernel and initrd, for HTTP and TFTP.
func (s *server) openUKI(ctx context.Context, profile, sha string) (*os.File, error) {
	if s.UKIs == nil {
		return nil, fmt.Errorf("this server has no systemd-stub to build %s (multicast.uki_stub): %w", ukiFile, fs.ErrNotExist)
	}
	var in ukiInputs
	if sha != "" {
		if !shaRE.MatchString(sha) || s.Kernels == nil {
			return nil, fmt.Errorf("want images/SHA256/%s of a built image, got %q: %w", ukiFile, sha, fs.ErrNotExist)
		}
		in = s.imageUKI(ctx, sha, true)
	} else {
		p, ok := s.Fleet.Profile(profile)
		files, has := p.Files(inventory.ArchX86_64)
		if !ok || !has || p.Root.Kernel == inventory.RootKernelImage {
			return nil, fmt.Errorf("profile %q has no x86_64 kernel of its own for %s: %w", profile, ukiFile, fs.ErrNotExist)
		}
		in = localUKI(files)
	}
	kernel, initrds, ok := in()
	if !ok {
		return nil, fmt.Errorf("%s needs a local kernel and initrds: %w", ukiFile, fs.ErrNotExist)
	}
	return s.UKIs.Open(kernel, initrds)
}

// ukiHTTP serves GET /profiles/{name}/boot.efi and /images/{sha}/boot.efi.
func (s *server) ukiHTTP(w http.ResponseWriter, r *http.Request) {
	f, err := s.openUKI(r.Context(), r.PathValue("name"), r.PathValue("sha"))
	if err != nil {
		s.log.Warn("unified kernel image refused", "mac", queryMAC(r), "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	s.serveFile(w, r, f, r.URL.Path[1:])
}
