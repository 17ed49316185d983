package httpboot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/ipxe"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// FileOpener opens a client-supplied path inside the served roots, refusing
// anything that leaves them. *safefs.Roots implements it.
type FileOpener interface {
	Open(name string) (*os.File, error)
}

// Fleet says what each machine boots.
type Fleet interface {
	Resolve(mac net.HardwareAddr) (machineview.Target, bool)
	Profile(name string) (inventory.Profile, bool)
}

// Roots gives machines whose profile has a root their diskless root for
// one boot. IssueRoot is called at every script render; each call voids
// the export of the previous one, so it must not be called for anything
// but a script the machine will boot.
type Roots interface {
	IssueRoot(ctx context.Context, mac net.HardwareAddr, root inventory.Root) (RootBoot, error)
}

// RootBoot is the diskless root of one boot.
type RootBoot struct {
	Arg    string // the value of bootfleet.root: nbd:SERVER_IP:PORT:EXPORT
	Args   string // more kernel parameters the root needs (bootfleet.overlay=client-ram), or ""
	Image  string // the image's name, for logs
	SHA256 string // the image content the export serves; a kernel from the image comes from it
}

// BootClock ends a machine's boot and says how long it took.
type BootClock interface {
	Complete(mac net.HardwareAddr) (time.Duration, bool)
}

// FileTransfer describes one file served to a client.
type FileTransfer struct {
	MAC      net.HardwareAddr // from the URL's ?mac=; nil when absent or malformed
	Remote   string           // client ip:port
	Name     string           // as requested: a /files/ path or the profile's file
	Bytes    int64            // body bytes written
	Start    time.Time
	Duration time.Duration
}

// TransferObserver hears about every file served (not HEAD requests),
// for telemetry. Both methods run on the request's goroutine and must not
// block: HTTPTransferStarted before the first byte, HTTPTransferDone after
// the last.
type TransferObserver interface {
	HTTPTransferStarted()
	HTTPTransferDone(FileTransfer)
}

// MilestoneRecorder hears about points a client reports: "ipxe-script"
// when iPXE fetches its script, and NAME from GET or POST
// /milestone/{mac}/{NAME}. It must not block.
type MilestoneRecorder interface {
	Milestone(mac net.HardwareAddr, name, remote string)
}

// Config wires the handler. Fleet, Boots and BaseURL are required.
type Config struct {
	Files      FileOpener // nil serves no /files/
	Fleet      Fleet
	Boots      BootClock
	Transfers  TransferObserver  // optional
	Milestones MilestoneRecorder // optional; nil answers /milestone/ with 404
	RootIO     RootIORecorder    // optional; nil takes root-io reports and keeps nothing
	Roots      Roots             // optional; nil fails scripts of profiles with a root
	Kernels    ImageKernels      // optional; nil fails scripts of profiles with root.kernel: image
	Mirrors    Mirrors           // optional; nil names only this server in scripts
	NextBoots  NextBoots         // optional; nil ignores bootfleet machine next-boot
	BaseURL    string            // e.g. http://10.213.0.1:8080, as clients reach this server
	// IdentityURL, if set, is where the diskless agent fetches the
	// machine's identity (package identitysvc): scripts of profiles with
	// a root carry it as bootfleet.identity=.
	IdentityURL string
	ServerIP    string
	// TFTM, when set, makes scripts fetch a profile's local kernel and
	// initrds by RFC 2090 multicast TFTP first (tftm://ServerIP/...,
	// served by GrubTFTP's profiles/ paths), HTTP after it if that fails.
	TFTM bool
	// MTFTP, when set, makes scripts of profiles with a diskless root
	// fetch the kernel by PXE MTFTP first (mtftp://ServerIP/PATH, PATH
	// as GrubTFTP serves it), when it grants the group; nil names none.
	MTFTP Granter
	// Groups, when set, drops mtftp:// from the scripts of machines whose
	// root proxies found the network dropping multicast (see GroupHealth).
	Groups *GroupHealth
	// UKIs, when set with MTFTP, builds the unified kernel image that
	// UEFI machines of x86_64 diskless profiles fetch by mtftp:// in
	// place of kernel and initrds; nil sends the kernel alone.
	UKIs UKIs
	// DiskARM64 is the chain of arm64 UEFI HTTP Boot's disk images; zero
	// serves none.
	DiskARM64 DiskChain
	Logger    *slog.Logger
}

type server struct {
	Config
	log *slog.Logger
}

// New returns the HTTP boot handler.
func New(c Config) http.Handler {
	s := &server{Config: c, log: c.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ipxe/{mac}", s.script)
	// x86_64's files keep their old paths; other architectures' sit
	// under /profiles/NAME/ARCH/.
	for _, arch := range []string{inventory.ArchX86_64, inventory.ArchARM64} {
		dir := "/profiles/{name}/"
		if arch != inventory.ArchX86_64 {
			dir += arch + "/"
		}
		mux.HandleFunc("GET "+dir+"kernel", s.profileFile(arch))
		mux.HandleFunc("GET "+dir+"initrd/{i}/{base}", s.profileFile(arch))
	}
	mux.HandleFunc("GET /profiles/{name}/"+ukiFile, s.ukiHTTP)
	mux.HandleFunc("GET /images/{sha}/"+ukiFile, s.ukiHTTP)
	mux.HandleFunc("GET /images/{sha}/"+kernelFile, s.imageFile(kernelFile))
	mux.HandleFunc("GET /images/{sha}/"+initrdFile, s.imageFile(initrdFile))
	mux.HandleFunc("GET /files/{path...}", s.file)
	for _, p := range grub.Stage1Paths {
		mux.HandleFunc("GET /"+p, s.grubStage1(grub.Stage1))
	}
	mux.HandleFunc("GET /"+grub.Stage1ARM64Path, s.grubStage1(grub.Stage1ARM64))
	for _, p := range grub.ModuleLists {
		mux.HandleFunc("GET /"+p, func(w http.ResponseWriter, r *http.Request) {})
	}
	mux.HandleFunc("GET /grub/{mac}/grub.cfg", s.grubConfig(inventory.ArchX86_64))
	mux.HandleFunc("GET /grub/{mac}/"+inventory.ArchARM64+"/grub.cfg", s.grubConfig(inventory.ArchARM64))
	mux.HandleFunc("GET /grub/{mac}/"+inventory.ArchARM64+"/"+pxe.ARM64DiskFile, s.armDisk)
	mux.HandleFunc("GET /done/{mac}", s.done)
	mux.HandleFunc("POST /done/{mac}", s.done)
	if c.Milestones != nil {
		mux.HandleFunc("GET /milestone/{mac}/{name}", s.milestone)
		mux.HandleFunc("POST /milestone/{mac}/{name}", s.milestone)
		mux.HandleFunc("GET /grub/{mac}/milestone/{name}", s.grubMilestone)
	}
	return mux
}

// macPath formats a MAC the way URLs carry it: hyphens survive every URL
// parser, colons do not always.
func macPath(mac net.HardwareAddr) string {
	return strings.ReplaceAll(mac.String(), ":", "-")
}

func parseMAC(w http.ResponseWriter, s string) (net.HardwareAddr, bool) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		http.Error(w, fmt.Sprintf("want a MAC like 52-54-00-12-34-56, got %q", s), http.StatusBadRequest)
		return nil, false
	}
	return mac, true
}

func (s *server) script(w http.ResponseWriter, r *http.Request) {
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
	if r.Method == http.MethodHead {
		if t.Spec.Root.Image != "" {
			// Rendering issues a new root export and voids the previous one
			// (and empties an ephemeral overlay): only a GET that boots may.
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			return
		}
	} else if t2, local := s.nextBoot(r.Context(), t, r.RemoteAddr); local {
		s.serveBoot(w, r, t, "script", "ipxe-script", func(context.Context, machineview.Target) (string, error) { return localScript, nil })
		return
	} else {
		t = t2
	}
	// iPXE built for arm64 asks with ?arch=arm64 (pxe.PlanFor's script URL).
	arch := r.URL.Query().Get("arch")
	if arch == "" {
		arch = inventory.ArchX86_64
	}
	s.serveBoot(w, r, t, "script", "ipxe-script", func(ctx context.Context, t machineview.Target) (string, error) {
		return s.render(ctx, t, arch)
	})
}

// serveBoot answers a machine's boot, rendered by render (an iPXE script
// or a grub config), and records milestone: the client fetched it.
func (s *server) serveBoot(w http.ResponseWriter, r *http.Request, t machineview.Target, what, milestone string,
	render func(context.Context, machineview.Target) (string, error)) {
	mac := t.Machine.MAC
	body, err := render(r.Context(), t)
	if err != nil {
		s.log.Error("render "+what, "mac", mac.String(), "profile", t.Profile, "err", err)
		http.Error(w, "profile "+t.Profile+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, body)
	if s.Milestones != nil {
		s.Milestones.Milestone(mac, milestone, r.RemoteAddr)
	}
	s.log.Info(what+" served", "mac", mac.String(), "name", t.Machine.Name, "profile", t.Profile, "remote", r.RemoteAddr)
}

func (s *server) render(ctx context.Context, t machineview.Target, arch string) (string, error) {
	b, err := s.boot(ctx, t, arch)
	if err != nil {
		return "", err
	}
	return ipxe.Script(b), nil
}

// boot is what the machine loads for this boot, as URLs on this server
// (with ?mac= for telemetry) or the profile's own URLs. It issues the
// machine's diskless root, if it has one, and so voids the previous one.
// arch is the machine's CPU (inventory.ArchX86_64 or ArchARM64): the
// kernel and initrds are its profile's for that architecture, and a
// profile with none for it is an error, never another one's files.
func (s *server) boot(ctx context.Context, t machineview.Target, arch string) (ipxe.Boot, error) {
	files, ok := t.Spec.Files(arch)
	if !ok && t.Spec.Root.Kernel != inventory.RootKernelImage {
		return ipxe.Boot{}, fmt.Errorf("the machine is %s and profile %s has no %s kernel; add one (arm64: {kernel: ...} for arm64), or give the machine a profile that has one", arch, t.Profile, arch)
	}
	if t.Spec.Root.Kernel == inventory.RootKernelImage && arch != inventory.ArchX86_64 {
		return ipxe.Boot{}, fmt.Errorf("the machine is %s, and profile %s boots its root image's kernel, which bootfleet serves to x86_64 machines only; give the profile arm64: {kernel: ...} instead", arch, t.Profile)
	}
	mp := macPath(t.Machine.MAC)
	vars := ipxe.Vars{
		MAC:      t.Machine.MAC.String(),
		Name:     t.Machine.Name,
		Profile:  t.Profile,
		ServerIP: s.ServerIP,
		HTTPBase: s.BaseURL,
		DoneURL:  s.BaseURL + "/done/" + mp,
	}
	var root RootBoot
	if t.Spec.Root.Image != "" {
		if s.Roots == nil {
			return ipxe.Boot{}, fmt.Errorf("root image %s: this server has no diskless root service", t.Spec.Root.Image)
		}
		if t.Spec.Root.Kernel == inventory.RootKernelImage && s.Kernels == nil {
			return ipxe.Boot{}, fmt.Errorf("root image %s: root.kernel is image, but this server builds no kernels from images", t.Spec.Root.Image)
		}
		var err error
		if root, err = s.Roots.IssueRoot(ctx, t.Machine.MAC, t.Spec.Root); err != nil {
			return ipxe.Boot{}, err
		}
		vars.Root = root.Arg
	}
	cmdline, err := ipxe.RenderCmdline(t.Spec.Cmdline, vars)
	if err != nil {
		return ipxe.Boot{}, err
	}
	if vars.Root != "" && !strings.Contains(cmdline, vars.Root) {
		cmdline = strings.TrimSpace(cmdline + " bootfleet.root=" + vars.Root)
	}
	if root.Args != "" {
		cmdline = strings.TrimSpace(cmdline + " " + root.Args)
	}
	if vars.Root != "" && s.Milestones != nil {
		// The diskless agent reports its steps here, into the boot record.
		cmdline += " bootfleet.milestones=" + s.BaseURL + "/milestone/" + mp
	}
	if vars.Root != "" && s.IdentityURL != "" {
		cmdline += " bootfleet.identity=" + s.IdentityURL
	}
	q := "?mac=" + mp
	if t.Spec.Root.Kernel == inventory.RootKernelImage {
		b := s.spread(s.imageBoot(root, q, cmdline), t.Machine.MAC, root.SHA256, 0)
		return s.mtftp(b, t.Machine.MAC, "images/"+root.SHA256, kernelFile, s.imageKernelSize(root.SHA256), s.imageUKI(ctx, root.SHA256, false)), nil
	}
	prof := s.BaseURL + "/profiles/" + url.PathEscape(t.Profile)
	if arch != inventory.ArchX86_64 {
		prof += "/" + arch
	}
	b := ipxe.Boot{Kernel: prof + "/kernel" + q, Cmdline: cmdline}
	if isURL(files.Kernel) {
		b.Kernel = files.Kernel
	}
	for i, rd := range files.Initrd {
		base := path.Base(rd)
		u := fmt.Sprintf("%s/initrd/%d/%s%s", prof, i, url.PathEscape(base), q)
		if isURL(rd) {
			u = rd
		}
		b.Initrds = append(b.Initrds, ipxe.Initrd{URL: u, Name: base})
	}
	b = s.spread(b, t.Machine.MAC, "", localSize(files))
	if s.TFTM {
		b = s.tftm(b, files, t.Profile, arch)
	}
	if vars.Root != "" && !isURL(files.Kernel) {
		in := localUKI(files)
		if arch != inventory.ArchX86_64 {
			in = func() (string, []string, bool) { return "", nil, false }
		}
		b = s.mtftp(b, t.Machine.MAC, profilePath(t.Profile, arch), "kernel", localFileSize(files.Kernel), in)
	}
	return b, nil
}

// tftm puts tftm:// URLs of the profile's local files ahead of their HTTP
// URLs, which stay as the fallback: a client that cannot take the group
// (firmware without tftm, a switch that drops it) still boots.
func (s *server) tftm(b ipxe.Boot, files inventory.ArchBoot, profile, arch string) ipxe.Boot {
	prof := "tftm://" + s.ServerIP + "/" + profilePath(profile, arch)
	if !isURL(files.Kernel) {
		b.Kernel, b.KernelAlt = prof+"/kernel", append([]string{b.Kernel}, b.KernelAlt...)
	}
	for i, rd := range files.Initrd {
		if isURL(rd) {
			continue
		}
		u := fmt.Sprintf("%s/initrd/%d/%s", prof, i, url.PathEscape(path.Base(rd)))
		b.Initrds[i].URL, b.Initrds[i].Alt = u, append([]string{b.Initrds[i].URL}, b.Initrds[i].Alt...)
	}
	return b
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// profileFile serves the kernel or an initrd a profile names for arch.
func (s *server) profileFile(arch string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		p, ok := s.Fleet.Profile(name)
		if !ok {
			http.Error(w, "no profile named "+name, http.StatusNotFound)
			return
		}
		if p.Root.Kernel == inventory.RootKernelImage {
			http.Error(w, "profile "+name+" boots the kernel of its root image: its scripts name /images/SHA256/"+kernelFile, http.StatusNotFound)
			return
		}
		files, ok := p.Files(arch)
		if !ok {
			http.Error(w, "profile "+name+" has no "+arch+" kernel", http.StatusNotFound)
			return
		}
		local := files.Kernel
		if is := r.PathValue("i"); is != "" {
			i, err := strconv.Atoi(is)
			if err != nil || i < 0 || i >= len(files.Initrd) {
				http.Error(w, fmt.Sprintf("profile %s has %d initrds for %s, got index %q", name, len(files.Initrd), arch, is), http.StatusNotFound)
				return
			}
			local = files.Initrd[i]
		}
		s.serveLocal(w, r, name, local)
	}
}

// serveLocal serves a profile's file: a redirect to a URL, or the local
// file.
func (s *server) serveLocal(w http.ResponseWriter, r *http.Request, name, local string) {
	if isURL(local) {
		http.Redirect(w, r, local, http.StatusFound)
		return
	}
	f, err := os.Open(local)
	if err != nil {
		s.log.Error("profile file missing; fix the path in the profile", "profile", name, "path", local, "err", err)
		http.Error(w, "profile file unavailable", http.StatusNotFound)
		return
	}
	defer f.Close()
	s.serveFile(w, r, f, local)
}

func (s *server) file(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("path")
	if s.Files == nil {
		http.NotFound(w, r)
		return
	}
	f, err := s.Files.Open(name)
	if err != nil {
		code := http.StatusNotFound
		if !errors.Is(err, fs.ErrNotExist) {
			code = http.StatusForbidden
		}
		s.log.Warn("file refused", "path", name, "remote", r.RemoteAddr, "err", err)
		http.Error(w, http.StatusText(code), code)
		return
	}
	defer f.Close()
	s.serveFile(w, r, f, name)
}

func (s *server) serveFile(w http.ResponseWriter, r *http.Request, f *os.File, name string) {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, "not a regular file", http.StatusForbidden)
		return
	}
	head := r.Method == http.MethodHead
	if s.Transfers != nil && !head {
		s.Transfers.HTTPTransferStarted()
	}
	start := time.Now()
	cw := &countingWriter{ResponseWriter: w}
	http.ServeContent(cw, r, path.Base(name), st.ModTime(), f)
	took := time.Since(start)
	if head {
		return
	}
	if s.Transfers != nil {
		mac, _ := net.ParseMAC(r.URL.Query().Get("mac"))
		s.Transfers.HTTPTransferDone(FileTransfer{MAC: mac, Remote: r.RemoteAddr, Name: name,
			Bytes: cw.n, Start: start, Duration: took})
	}
	s.log.Info("file sent", "mac", queryMAC(r), "remote", r.RemoteAddr, "file", name,
		"bytes", cw.n, "seconds", roundSec(took), "mbps", mbps(cw.n, took))
}

func (s *server) done(w http.ResponseWriter, r *http.Request) {
	mac, ok := parseMAC(w, r.PathValue("mac"))
	if !ok {
		return
	}
	name := ""
	if t, ok := s.Fleet.Resolve(mac); ok {
		name = t.Machine.Name
	}
	took, ok := s.Boots.Complete(mac)
	if ok {
		s.log.Info("boot complete", "mac", mac.String(), "name", name, "seconds", roundSec(took), "remote", r.RemoteAddr)
	} else {
		s.log.Info("boot complete", "mac", mac.String(), "name", name, "seconds", "unknown (no DHCP seen for this boot)", "remote", r.RemoteAddr)
	}
	io.WriteString(w, "ok\n")
}

// milestone records a point the client reports, e.g. from an initramfs
// hook: wget -q -O- http://SERVER/milestone/MAC/kernel-up
func (s *server) milestone(w http.ResponseWriter, r *http.Request) {
	mac, ok := parseMAC(w, r.PathValue("mac"))
	if !ok {
		return
	}
	name := r.PathValue("name")
	if !validMilestone(name) {
		http.Error(w, fmt.Sprintf("want a milestone name of 1-40 characters a-z 0-9 . _ -, got %q", name), http.StatusBadRequest)
		return
	}
	if name == RootIOMilestone {
		if s.RootIO != nil {
			if err := s.RootIO.RootIO(mac, r.URL.Query(), r.RemoteAddr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		if s.Groups != nil {
			s.Groups.Observe(mac, r.URL.Query())
		}
		io.WriteString(w, "ok\n")
		return
	}
	s.Milestones.Milestone(mac, name, r.RemoteAddr)
	s.logReconnect(mac, name, r)
	io.WriteString(w, "ok\n")
}

func validMilestone(name string) bool {
	if name == "" || len(name) > 40 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// queryMAC is the ?mac= the scripts put on file URLs, in the colon form every
// other log line uses; empty when absent or malformed.
func queryMAC(r *http.Request) string {
	mac, err := net.ParseMAC(r.URL.Query().Get("mac"))
	if err != nil {
		return ""
	}
	return mac.String()
}

func roundSec(d time.Duration) float64 {
	return float64(d.Round(10*time.Millisecond)) / float64(time.Second)
}

func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(n)/d.Seconds()/1e4)) / 100 // MB/s, two decimals
}

// countingWriter counts body bytes and keeps the ReaderFrom path open, so
// that counting does not cost us sendfile.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(c.ResponseWriter, r)
	}
	c.n += n
	return n, err
}

// JoinSlashes wraps h so that runs of slashes in a request's path count
// as one. Firmware joins URLs naively (shim after UEFI HTTP boot asks
// for /files//grubx64.efi), and http.ServeMux answers an unclean path
// with a redirect, which no UEFI HTTP client follows. Dot segments are
// left to the mux and to package safefs, which refuse them.
func JoinSlashes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "//") {
			r2 := *r
			u := *r.URL
			for strings.Contains(u.Path, "//") {
				u.Path = strings.ReplaceAll(u.Path, "//", "/")
			}
			u.RawPath = ""
			r2.URL = &u
			r = &r2
		}
		h.ServeHTTP(w, r)
	})
}
