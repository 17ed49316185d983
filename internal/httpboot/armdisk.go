package httpboot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/fatimg"
	"github.com/bootfleet/bootfleet/internal/grub"
	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/pxe"
)

// DiskChain is the signed chain packed into arm64 UEFI HTTP Boot's disk
// image: Debian's shimaa64.efi.signed and grubaa64.efi.signed, the grub
// that reads its config from the device it was loaded from.
type DiskChain struct {
	Shim, Grub string // local paths; both empty: no disk images
}

// Where the disk image holds its files. EDK II boots
// \EFI\BOOT\BOOTAA64.EFI (shim), which loads grubaa64.efi beside it.
// Debian's grubaa64 has the prefix /EFI/debian on its own device and
// sources $prefix/grub.cfg.
const (
	diskShim    = "EFI/BOOT/BOOTAA64.EFI"
	diskGrub    = "EFI/BOOT/" + pxe.GrubARM64File
	diskGrubCfg = "EFI/debian/grub.cfg"
	diskDir     = "bootfleet"
	diskKernel  = diskDir + "/vmlinuz"
	// diskGrubCfgSize is the fixed size of the image's grub.cfg. The
	// firmware sizes its RAM disk from a HEAD request, which must not
	// render the machine's boot (that issues its diskless root), so the
	// image has the same size whatever the config says.
	diskGrubCfgSize = 8 << 10
)

// armDisk serves GET and HEAD /grub/{mac}/arm64/disk.img: a FAT image
// with the signed chain, the machine's grub.cfg for this boot and its
// profile's arm64 kernel and initrds. It is assembled as it is sent, so
// only the config is per machine and nothing is stored.
func (s *server) armDisk(w http.ResponseWriter, r *http.Request) {
	mac, ok := parseMAC(w, r.PathValue("mac"))
	if !ok {
		return
	}
	t, ok := s.Fleet.Resolve(mac)
	switch {
	case !ok:
		s.log.Warn("no profile for machine; add it under machines or set default_profile", "mac", mac.String(), "remote", r.RemoteAddr)
		http.Error(w, "no profile for "+mac.String(), http.StatusNotFound)
		return
	case t.Spec.Loader != inventory.LoaderGrub:
		http.Error(w, "profile "+t.Profile+" does not boot through grub", http.StatusNotFound)
		return
	case s.DiskARM64.Shim == "" || s.DiskARM64.Grub == "":
		s.log.Warn("an arm64 machine asked for its HTTP Boot disk image, but none is served", "mac", mac.String(), "remote", r.RemoteAddr,
			"fix", "set secure_boot.shim_arm64 and secure_boot.grub_arm64_disk")
		http.Error(w, "no arm64 disk images on this server", http.StatusNotFound)
		return
	}
	cfg := bytes.Repeat([]byte{'\n'}, diskGrubCfgSize)
	kernel, initrds := "", []string(nil)
	if r.Method != http.MethodHead {
		text, k, rds, err := s.armDiskBoot(r.Context(), t, r.RemoteAddr)
		if err != nil {
			s.log.Error("render arm64 disk image", "mac", mac.String(), "profile", t.Profile, "err", err)
			http.Error(w, "profile "+t.Profile+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		if len(text) > diskGrubCfgSize {
			s.log.Error("render arm64 disk image", "mac", mac.String(), "profile", t.Profile,
				"err", fmt.Sprintf("grub.cfg is %d bytes, the image holds %d; shorten the profile's cmdline", len(text), diskGrubCfgSize))
			http.Error(w, "grub.cfg too long", http.StatusInternalServerError)
			return
		}
		copy(cfg, text)
		kernel, initrds = k, rds
	} else if files, ok := t.Spec.Files(inventory.ArchARM64); ok {
		kernel, initrds = files.Kernel, files.Initrd
	}
	files, closeAll, err := s.armDiskFiles(cfg, kernel, initrds)
	defer closeAll()
	var size int64
	if err == nil {
		size, err = fatimg.Size(files)
	}
	if err != nil {
		s.log.Error("arm64 disk image", "mac", mac.String(), "profile", t.Profile, "err", err)
		http.Error(w, "profile "+t.Profile+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.efi-img")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		return
	}
	if s.Transfers != nil {
		s.Transfers.HTTPTransferStarted()
	}
	start := time.Now()
	cw := &countingWriter{ResponseWriter: w}
	_, err = fatimg.Write(cw, files)
	took := time.Since(start)
	name := "/grub/" + macPath(mac) + "/arm64/" + pxe.ARM64DiskFile
	if s.Transfers != nil {
		s.Transfers.HTTPTransferDone(FileTransfer{MAC: mac, Remote: r.RemoteAddr, Name: name, Bytes: cw.n, Start: start, Duration: took})
	}
	if err != nil {
		s.log.Warn("arm64 disk image cut short", "mac", mac.String(), "remote", r.RemoteAddr, "bytes", cw.n, "of", size, "err", err)
		return
	}
	s.log.Info("file sent", "mac", mac.String(), "remote", r.RemoteAddr, "file", name,
		"bytes", cw.n, "seconds", roundSec(took), "mbps", mbps(cw.n, took))
}

// armDiskBoot renders the image's grub.cfg for this boot and names the
// local kernel and initrds it loads. A machine sent to its local disk
// gets a config that exits, and no kernel.
func (s *server) armDiskBoot(ctx context.Context, t machineview.Target, remote string) (cfg, kernel string, initrds []string, err error) {
	t, local := s.nextBoot(ctx, t, remote)
	if local {
		s.recordArmDisk(t, remote)
		return localGrub, "", nil, nil
	}
	if t.Spec.Root.Kernel == inventory.RootKernelImage {
		return "", "", nil, fmt.Errorf("the machine is arm64, and profile %s boots its root image's kernel, which bootfleet serves to x86_64 machines only; give the profile arm64: {kernel: ...} instead", t.Profile)
	}
	files, ok := t.Spec.Files(inventory.ArchARM64)
	if !ok {
		return "", "", nil, fmt.Errorf("the machine is arm64 and profile %s has no arm64 kernel; add one (arm64: {kernel: ...}), or give the machine a profile that has one", t.Profile)
	}
	for _, f := range append([]string{files.Kernel}, files.Initrd...) {
		if isURL(f) {
			return "", "", nil, fmt.Errorf("arm64 file %s is a URL, but UEFI HTTP Boot packs the kernel and initrds into a disk image; give the profile local files", f)
		}
	}
	b, err := s.boot(ctx, t, inventory.ArchARM64)
	if err != nil {
		return "", "", nil, err
	}
	m := grub.Machine{Cmdline: b.Cmdline, Kernel: "/" + diskKernel}
	for i, rd := range files.Initrd {
		m.Initrds = append(m.Initrds, fmt.Sprintf("/%s/initrd/%d/%s", diskDir, i, path.Base(rd)))
	}
	text, err := grub.Render(m)
	if err != nil {
		return "", "", nil, err
	}
	s.recordArmDisk(t, remote)
	return text, files.Kernel, files.Initrd, nil
}

// recordArmDisk notes that the machine got its grub config, which is in
// the image.
func (s *server) recordArmDisk(t machineview.Target, remote string) {
	if s.Milestones != nil {
		s.Milestones.Milestone(t.Machine.MAC, MilestoneGrubConfig, remote)
	}
	s.log.Info("grub config served in the arm64 disk image", "mac", t.Machine.MAC.String(), "name", t.Machine.Name, "profile", t.Profile, "remote", remote)
}

// armDiskFiles opens the image's files. kernel and initrds are the
// profile's local files ("" for none); closeAll closes what was opened.
func (s *server) armDiskFiles(cfg []byte, kernel string, initrds []string) ([]fatimg.File, func(), error) {
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	files := []fatimg.File{{Path: diskGrubCfg, Size: int64(len(cfg)), Content: bytes.NewReader(cfg)}}
	add := func(inImage, local, what string) error {
		f, err := os.Open(local)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		opened = append(opened, f)
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("%s: %s is not a regular file", what, local)
		}
		files = append(files, fatimg.File{Path: inImage, Size: st.Size(), Content: io.NewSectionReader(f, 0, st.Size())})
		return nil
	}
	if err := add(diskShim, s.DiskARM64.Shim, "secure_boot.shim_arm64"); err != nil {
		return nil, closeAll, err
	}
	if err := add(diskGrub, s.DiskARM64.Grub, "secure_boot.grub_arm64_disk"); err != nil {
		return nil, closeAll, err
	}
	if kernel != "" {
		if err := add(diskKernel, kernel, "arm64 kernel"); err != nil {
			return nil, closeAll, err
		}
	}
	for i, rd := range initrds {
		if err := add(fmt.Sprintf("%s/initrd/%d/%s", diskDir, i, path.Base(rd)), rd, fmt.Sprintf("arm64 initrd %d", i)); err != nil {
			return nil, closeAll, err
		}
	}
	return files, closeAll, nil
}
