package httpboot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
)

// MilestoneGrubConfig is recorded when grub fetches a machine's config:
// the machine came through the signed chain.
const MilestoneGrubConfig = "grub-config"

// grubStage1 serves the config grub reads from its prefix (text, one per
// architecture) when it came over HTTP (a grub with http built in, after
// UEFI HTTP boot).
func (s *server) grubStage1(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, text)
	}
}

// grubConfig serves GET /grub/{mac}/grub.cfg (x86_64) and
// /grub/{mac}/arm64/grub.cfg: the machine's boot, as its iPXE script would
// be, for grub. Only machines whose profile's loader is grub get one, so
// grub can fetch nothing but what their profile names.
func (s *server) grubConfig(arch string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveGrubConfig(w, r, arch) }
}

func (s *server) serveGrubConfig(w http.ResponseWriter, r *http.Request, arch string) {
	mac, ok := parseMAC(w, r.PathValue("mac"))
	if !ok {
		return
	}
	t, ok := s.Fleet.Resolve(mac)
	if !ok {
		s.log.Warn("no profile for machine; add it under machines or set default_profile", "mac", mac.String(), "remote", r.RemoteAddr)
		http.Error(w, "no profile for "+mac.String(), http.StatusNotFound)
		return
	}
	if t.Spec.Loader != inventory.LoaderGrub {
		s.log.Warn("grub asked for the config of a machine whose profile does not load grub", "mac", mac.String(),
			"profile", t.Profile, "remote", r.RemoteAddr, "fix", "set loader: grub in the profile, or give the machine a profile that has it")
		http.Error(w, "profile "+t.Profile+" does not boot through grub", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodHead {
		t2, local := s.nextBoot(r.Context(), t, r.RemoteAddr)
		if local {
			s.serveBoot(w, r, t, "grub config", MilestoneGrubConfig, func(context.Context, machineview.Target) (string, error) { return localGrub, nil })
			return
		}
		t = t2
	}
	s.serveBoot(w, r, t, "grub config", MilestoneGrubConfig, func(ctx context.Context, t machineview.Target) (string, error) {
		return s.grubConfigText(ctx, t, arch)
	})
}

// grubMilestone records a step the machine's grub config reports. Grub
// runs the answer (source), so it is a comment.
func (s *server) grubMilestone(w http.ResponseWriter, r *http.Request) {
	mac, ok := parseMAC(w, r.PathValue("mac"))
	if !ok {
		return
	}
	name := r.PathValue("name")
	if !validMilestone(name) {
		http.Error(w, "# bad milestone name", http.StatusBadRequest)
		return
	}
	s.recordGrubMilestone(mac, name, r.RemoteAddr)
	io.WriteString(w, "# bootfleet: recorded "+name+"\n")
}

func (s *server) recordGrubMilestone(mac net.HardwareAddr, name, remote string) {
	s.Milestones.Milestone(mac, name, remote)
	if strings.HasPrefix(name, "failed-") {
		s.log.Warn("grub reported a failed boot step", "mac", mac.String(), "step", name, "remote", remote,
			"fix", "under Secure Boot the kernel must be signed by a key shim trusts (Debian's linux-image packages are)")
	}
}

// grubConfigText renders the machine's grub.cfg for a grub of arch. It
// names the files as paths on grub's own server, which serves them over
// HTTP and TFTP alike.
func (s *server) grubConfigText(ctx context.Context, t machineview.Target, arch string) (string, error) {
	if t.Spec.Root.Kernel == inventory.RootKernelImage {
		return "", errors.New("root.kernel: image is not served to grub yet; give the profile its own kernel and initrd, or loader: ipxe")
	}
	b, err := s.boot(ctx, t, arch)
	if err != nil {
		return "", err
	}
	m := grub.Machine{Cmdline: b.Cmdline}
	if m.Kernel, err = s.grubPath(b.Kernel); err != nil {
		return "", fmt.Errorf("kernel: %w", err)
	}
	for i, rd := range b.Initrds {
		p, err := s.grubPath(rd.URL)
		if err != nil {
			return "", fmt.Errorf("initrd %d: %w", i, err)
		}
		m.Initrds = append(m.Initrds, p)
	}
	if s.Milestones != nil {
		m.MilestoneBase = "/grub/" + macPath(t.Machine.MAC) + "/milestone"
	}
	return grub.Render(m)
}

// grubPath turns a URL of this server into its path, without the ?mac=
// query, which TFTP cannot carry; the address ties the transfer to the
// machine instead.
func (s *server) grubPath(u string) (string, error) {
	rest, ok := strings.CutPrefix(u, s.BaseURL+"/")
	if !ok {
		return "", fmt.Errorf("%s is not on this server: grub loads files only from the server it came from; give the profile local files", u)
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest = rest[:i]
	}
	return "/" + rest, nil
}
