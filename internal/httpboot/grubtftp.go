package httpboot

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/safefs"
	"github.com/bootfleet/bootfleet/internal/tftp"
)

// GrubTFTP serves over TFTP what grub asks for after PXE, in front of
// next: its first config, each machine's config and milestones, and the
// files machines' profiles name, under the same paths as over HTTP
// (grub/..., profiles/NAME/kernel, profiles/NAME/initrd/I/BASE,
// images/SHA256/vmlinuz and initrd.img). A
// machine's config is only given to machines whose profile's loader is
// grub, and a profile's files are only what the profile names.
func GrubTFTP(c Config, next tftp.FileSystem) tftp.FileSystem {
	s := &server{Config: c, log: c.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return grubTFTP{s: s, next: next}
}

type grubTFTP struct {
	s    *server
	next tftp.FileSystem
}

func (g grubTFTP) Open(name string) (tftp.File, error) {
	rel, err := safefs.Clean(name)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(rel, "/")
	switch {
	case rel == grub.Stage1Paths[0] || rel == grub.Stage1Paths[1]:
		return text(grub.Stage1), nil
	case rel == grub.Stage1ARM64Path:
		return text(grub.Stage1ARM64), nil
	case slices.Contains(grub.ModuleLists, rel):
		return text(""), nil
	case len(parts) == 3 && parts[0] == "grub" && parts[2] == "grub.cfg":
		return g.config(parts[1], inventory.ArchX86_64)
	case len(parts) == 4 && parts[0] == "grub" && parts[2] == inventory.ArchARM64 && parts[3] == "grub.cfg":
		return g.config(parts[1], inventory.ArchARM64)
	case len(parts) == 4 && parts[0] == "grub" && parts[2] == "milestone":
		return g.milestone(parts[1], parts[3])
	case len(parts) == 3 && parts[0] == "profiles" && parts[2] == ukiFile:
		return g.uki(parts[1], "")
	case len(parts) >= 3 && parts[0] == "profiles":
		return g.profileFile(parts[1:])
	case len(parts) == 3 && parts[0] == "images" && parts[2] == ukiFile:
		return g.uki("", parts[1])
	case len(parts) == 3 && parts[0] == "images" && (parts[2] == kernelFile || parts[2] == initrdFile) && g.s.Kernels != nil:
		return g.imageFile(parts[1], parts[2])
	}
	return g.next.Open(name)
}

func (g grubTFTP) config(macs, arch string) (tftp.File, error) {
	mac, err := parseMACString(macs)
	if err != nil {
		return nil, err
	}
	t, ok := g.s.Fleet.Resolve(mac)
	if !ok || t.Spec.Loader != inventory.LoaderGrub {
		g.s.log.Warn("grub asked for the config of a machine whose profile does not load grub", "mac", mac.String(),
			"fix", "set loader: grub in the machine's profile")
		return nil, fmt.Errorf("machine %s does not boot through grub: %w", mac, fs.ErrNotExist)
	}
	t, local := g.s.nextBoot(context.Background(), t, "")
	cfg := localGrub
	if !local {
		cfg, err = g.s.grubConfigText(context.Background(), t, arch)
	}
	if err != nil {
		g.s.log.Error("render grub config", "mac", mac.String(), "profile", t.Profile, "err", err)
		return nil, fmt.Errorf("profile %s: %w", t.Profile, err)
	}
	if g.s.Milestones != nil {
		g.s.Milestones.Milestone(mac, MilestoneGrubConfig, "")
	}
	g.s.log.Info("grub config served", "mac", mac.String(), "name", t.Machine.Name, "profile", t.Profile, "arch", arch, "via", "tftp")
	return text(cfg), nil
}

func (g grubTFTP) milestone(macs, name string) (tftp.File, error) {
	mac, err := parseMACString(macs)
	if err != nil || g.s.Milestones == nil || !validMilestone(name) {
		return nil, fmt.Errorf("milestone %q of %q: %w", name, macs, fs.ErrNotExist)
	}
	g.s.recordGrubMilestone(mac, name, "")
	return text("# bootfleet: recorded " + name + "\n"), nil
}

// profileFile opens profiles/NAME/kernel or profiles/NAME/initrd/I/BASE,
// x86_64's, or the same under profiles/NAME/arm64/.
func (g grubTFTP) profileFile(parts []string) (tftp.File, error) {
	p, ok := g.s.Fleet.Profile(parts[0])
	if !ok {
		return nil, fmt.Errorf("no profile named %q: %w", parts[0], fs.ErrNotExist)
	}
	arch, rest := inventory.ArchX86_64, parts[1:]
	if len(rest) > 0 && rest[0] == inventory.ArchARM64 {
		arch, rest = inventory.ArchARM64, rest[1:]
	}
	files, ok := p.Files(arch)
	var local string
	switch {
	case !ok || p.Root.Kernel == inventory.RootKernelImage:
		return nil, fmt.Errorf("profile %s has no %s kernel: %w", parts[0], arch, fs.ErrNotExist)
	case len(rest) == 1 && rest[0] == "kernel":
		local = files.Kernel
	case len(rest) == 3 && rest[0] == "initrd":
		i, err := strconv.Atoi(rest[1])
		if err != nil || i < 0 || i >= len(files.Initrd) {
			return nil, fmt.Errorf("profile %s has %d initrds for %s, got %q: %w", parts[0], len(files.Initrd), arch, rest[1], fs.ErrNotExist)
		}
		local = files.Initrd[i]
	default:
		return nil, fmt.Errorf("profiles/%s: %w", strings.Join(parts, "/"), fs.ErrNotExist)
	}
	if isURL(local) {
		return nil, fmt.Errorf("profile %s: %s is a URL, which is not served over TFTP: %w", parts[0], local, fs.ErrNotExist)
	}
	f, err := os.Open(local)
	if err != nil {
		g.s.log.Error("profile file missing; fix the path in the profile", "profile", parts[0], "path", local, "err", err)
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("profile %s: %s is not a regular file: %w", parts[0], local, fs.ErrPermission)
	}
	return sizedFile{File: f, size: st.Size()}, nil
}

// imageFile opens images/SHA256/vmlinuz or initrd.img, an image's boot
// file as HTTP serves it, for mtftp:// and iPXE's TFTP fallback from it.
// The first open of a content waits for its build.
func (g grubTFTP) imageFile(sha, file string) (tftp.File, error) {
	if !shaRE.MatchString(sha) {
		return nil, fmt.Errorf("want images/SHA256/%s with a sha256 of 64 lower-case hex digits, got %q: %w", file, sha, fs.ErrNotExist)
	}
	f, err := g.s.Kernels.Open(context.Background(), sha, file)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("image %.12s %s: %w", sha, file, err)
	}
	return sizedFile{File: f, size: st.Size()}, nil
}

// uki opens a profile's or an image's boot.efi; the first open of one
// waits for its build.
func (g grubTFTP) uki(profile, sha string) (tftp.File, error) {
	f, err := g.s.openUKI(context.Background(), profile, sha)
	if err != nil {
		g.s.log.Warn("unified kernel image refused", "profile", profile, "sha256", sha, "via", "tftp", "err", err)
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", ukiFile, err)
	}
	return sizedFile{File: f, size: st.Size()}, nil
}

func parseMACString(s string) (net.HardwareAddr, error) {
	if u, err := url.PathUnescape(s); err == nil {
		s = u
	}
	m, err := net.ParseMAC(s)
	if err != nil || len(m) != 6 {
		return nil, fmt.Errorf("want a MAC, got %q: %w", s, fs.ErrNotExist)
	}
	return m, nil
}

type memText struct{ *bytes.Reader }

func (memText) Close() error { return nil }

func text(s string) tftp.File { return memText{bytes.NewReader([]byte(s))} }

type sizedFile struct {
	*os.File
	size int64
}

func (f sizedFile) Size() int64 { return f.size }
