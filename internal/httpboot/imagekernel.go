package httpboot

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"regexp"

	"github.com/bootfleet/bootfleet/internal/ipxe"
)

// ImageKernels gives the boot files of profiles with root.kernel: image:
// the kernel in a root image and an initramfs built from the image's
// modules, per image content. *imagekernel.Builder implements it.
type ImageKernels interface {
	// Prepare says content sha is image name and starts building its
	// files in the background if they are not built. It must not block.
	Prepare(name, sha string)
	// Open opens file "vmlinuz" or "initrd.img" of content sha. The first
	// request for a content waits for its build, seconds long; an error
	// wrapping fs.ErrNotExist means no such content, any other a failed
	// build.
	Open(ctx context.Context, sha, file string) (*os.File, error)
}

// The names of an image's boot files in URLs. initrdFile is also the
// initrd's name in the script, which the command line repeats as
// initrd=initrd.img for EFI stubs.
const (
	kernelFile = "vmlinuz"
	initrdFile = "initrd.img"
)

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// imageBoot loads the kernel and initramfs of the exact content the boot's
// NBD export serves: the URLs pin its sha256, not the image's name, so a
// re-import between script and download cannot pair one version's kernel
// with another's root. The build starts now, while iPXE reads the script.
func (s *server) imageBoot(root RootBoot, q, cmdline string) ipxe.Boot {
	s.Kernels.Prepare(root.Image, root.SHA256)
	base := s.BaseURL + "/images/" + root.SHA256 + "/"
	return ipxe.Boot{
		Kernel:  base + kernelFile + q,
		Initrds: []ipxe.Initrd{{URL: base + initrdFile + q, Name: initrdFile}},
		Cmdline: cmdline,
	}
}

// imageFile serves file of GET /images/{sha}/vmlinuz or /initrd.img.
func (s *server) imageFile(file string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sha := r.PathValue("sha")
		if !shaRE.MatchString(sha) {
			http.Error(w, "want /images/SHA256/"+file+" with a sha256 of 64 lower-case hex digits, got "+sha, http.StatusNotFound)
			return
		}
		if s.Kernels == nil {
			http.Error(w, "this server builds no kernels from images", http.StatusNotFound)
			return
		}
		f, err := s.Kernels.Open(r.Context(), sha, file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.log.Warn("image kernel file refused", "mac", queryMAC(r), "sha256", sha, "file", file, "remote", r.RemoteAddr, "err", err)
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil && r.Context().Err() != nil:
			return // the client left while the build ran; the build goes on
		case err != nil:
			s.log.Error("image kernel unavailable", "mac", queryMAC(r), "sha256", sha, "file", file, "remote", r.RemoteAddr, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		s.serveFile(w, r, f, "images/"+sha+"/"+file)
	}
}
