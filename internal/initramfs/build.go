package initramfs

import (
	"bytes"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Options says what goes into the initramfs.
type Options struct {
	// KernelDeb is a Debian linux-image-VERSION .deb; its modules are used
	// and its vmlinuz can be copied out (see Build). Exactly one of
	// KernelDeb and ModulesDir must be set.
	KernelDeb string
	// ModulesDir is a lib/modules/VERSION directory, e.g. of the running
	// kernel on a Debian server whose kernel the clients also boot.
	ModulesDir string
	// Image is a raw disk image (bootfleet's stored image of a root): the
	// newest kernel in its /boot and that kernel's modules from its
	// /lib/modules are used, so kernel and modules always match the root,
	// and the root's file system module is added. Linux only; needs root
	// to mount the image read-only.
	Image string
	// Modules to load; default DefaultModules. Their dependencies are added.
	Modules []string
	// NICDrivers are the NIC driver modules to include, after Modules
	// (see ParseNICDrivers): nil means DefaultNICDrivers, an empty list
	// none. The agent loads them all before DHCP; one the kernel lacks,
	// or whose dependencies it lacks, is left out with a warning.
	NICDrivers []string
	// Compression is CompressXZ or CompressGzip; default xz, or gzip
	// where the xz tool is missing.
	Compression string
	// Busybox is a static busybox binary; default /bin/busybox (Debian's
	// busybox-static package).
	Busybox string
	// Agent is the static bootfleet-agent binary, installed as /init.
	Agent string
	// Log gets one line per step; default discard.
	Log *slog.Logger
}

// Result describes a built initramfs.
type Result struct {
	KernelVersion string
	Modules       []string // load order
	NICDrivers    []string // the drivers of Options.NICDrivers the kernel has
	Compression   string   // CompressXZ or CompressGzip
	Vmlinuz       []byte   // the kernel image, when built from a .deb
}

// applets are the busybox commands the agent and the udhcpc script use.
var applets = []string{"sh", "ip", "udhcpc", "switch_root", "mount", "umount", "poweroff", "sleep", "cat", "ls", "dmesg", "insmod", "mkdir", "printf"}

// udhcpcScript configures the lease udhcpc got. It is one file, so that
// scripts/mkimage.sh gives the e2e test image the same one.
//
//go:embed udhcpc.script
var udhcpcScript []byte

// NICModulesList names, one a line, the NIC drivers of /etc/modules: the
// agent loads them all (a driver without its hardware only registers),
// and one that fails to load is not worth stopping a boot whose NIC
// another driver runs.
const NICModulesList = "etc/nic-modules"

// Build writes the compressed cpio to out.
func Build(out io.Writer, o Options) (Result, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if n := countSet(o.KernelDeb, o.ModulesDir, o.Image); n != 1 {
		return Result{}, errors.New("give exactly one of --kernel-deb (a linux-image .deb), --modules-dir (a lib/modules/VERSION directory) and --image (a root disk image)")
	}
	if o.Busybox == "" {
		o.Busybox = "/bin/busybox"
	}
	if len(o.Modules) == 0 {
		o.Modules = DefaultModules
	}
	agent, agentArch, err := readStatic(o.Agent, "the bootfleet agent", "build it with CGO_ENABLED=0 go build -o bootfleet-agent ./cmd/bootfleet-agent")
	if err != nil {
		return Result{}, err
	}
	busybox, busyboxArch, err := readStatic(o.Busybox, "busybox", "install Debian's busybox-static")
	if err != nil {
		return Result{}, err
	}

	var res Result
	modDir := o.ModulesDir
	if o.KernelDeb != "" {
		tmp, err := os.MkdirTemp("", "bootfleet-kernel-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(tmp)
		log.Info("extracting kernel package", "deb", o.KernelDeb)
		if out, err := exec.Command("dpkg-deb", "-x", o.KernelDeb, tmp).CombinedOutput(); err != nil {
			return Result{}, fmt.Errorf("dpkg-deb -x %s: %w: %s (is it a Debian package? dpkg-deb comes with dpkg)", o.KernelDeb, err, bytes.TrimSpace(out))
		}
		versions, _ := filepath.Glob(filepath.Join(tmp, "lib/modules/*"))
		if len(versions) != 1 {
			return Result{}, fmt.Errorf("%s has %d lib/modules/VERSION directories, want 1: is it a linux-image-VERSION package (not the linux-image-amd64 metapackage)?", o.KernelDeb, len(versions))
		}
		modDir = versions[0]
		res.KernelVersion = filepath.Base(modDir)
		if res.Vmlinuz, err = os.ReadFile(filepath.Join(tmp, "boot", "vmlinuz-"+res.KernelVersion)); err != nil {
			return Result{}, fmt.Errorf("%s has no boot/vmlinuz-%s: %w", o.KernelDeb, res.KernelVersion, err)
		}
	} else if o.Image != "" {
		k, err := openImageKernel(o.Image)
		if err != nil {
			return Result{}, err
		}
		defer k.close()
		log.Info("kernel found in the image", "image", o.Image, "kernel", k.version, "root_fs", k.fsType)
		modDir, res.KernelVersion = k.modulesDir, k.version
		if res.Vmlinuz, err = os.ReadFile(k.vmlinuz); err != nil {
			return Result{}, fmt.Errorf("read the image's kernel: %w", err)
		}
		if !slices.Contains(o.Modules, k.fsType) {
			o.Modules = append(slices.Clip(o.Modules), k.fsType)
		}
	} else {
		res.KernelVersion = filepath.Base(filepath.Clean(modDir))
	}
	tree, err := OpenTree(modDir)
	if err != nil {
		return Result{}, err
	}
	mods, err := tree.Resolve(o.Modules)
	if err != nil {
		return Result{}, err
	}
	add := func(extra []string, warn string) []string {
		var added []string
		for _, m := range extra {
			if slices.Contains(o.Modules, m) {
				added = append(added, m)
				continue
			}
			more, err := tree.Resolve(append(slices.Clip(o.Modules), m))
			if err != nil {
				log.Warn(warn, "module", m, "err", err)
				continue
			}
			o.Modules, mods = append(slices.Clip(o.Modules), m), more
			added = append(added, m)
		}
		return added
	}
	add(CacheModules, "module for client-side write caches left out; client-ram and client-disk boots of this kernel will fail")
	nics := o.NICDrivers
	if nics == nil {
		nics = DefaultNICDrivers
	}
	res.NICDrivers = add(nics, "NIC driver left out: the kernel lacks it or what it needs; machines with that NIC cannot boot this initramfs")
	if len(res.NICDrivers) == 0 && len(nics) > 0 {
		log.Warn("none of the NIC drivers asked for is in this kernel; only a NIC whose driver is built in can boot", "asked", strings.Join(nics, ","))
	}
	for _, m := range mods {
		res.Modules = append(res.Modules, m.Name)
	}
	log.Info("modules resolved", "kernel", res.KernelVersion, "order", strings.Join(res.Modules, " "))

	var archive bytes.Buffer
	w := NewCPIOWriter(&archive)
	var werr error
	try := func(err error) {
		if werr == nil {
			werr = err
		}
	}
	dirs := []string{"bin", "dev", "etc", "etc/udhcpc", "lib", "lib/modules", "newroot", "proc", "run", "sbin", "sys", "tmp", "usr", "usr/bin", "usr/sbin"}
	sort.Strings(dirs)
	for _, d := range dirs {
		try(w.Dir(d, 0o755))
	}
	try(w.CharDev("dev/console", 0o600, 5, 1))
	try(w.CharDev("dev/null", 0o666, 1, 3))
	try(w.File("init", 0o755, agent))
	try(w.File("bin/busybox", 0o755, busybox))
	for _, a := range applets {
		try(w.Symlink("bin/"+a, "busybox"))
	}
	try(w.File("etc/udhcpc/script", 0o755, udhcpcScript))
	try(w.File("etc/modules", 0o644, []byte(strings.Join(res.Modules, "\n")+"\n")))
	try(w.File(NICModulesList, 0o644, []byte(strings.Join(append(res.NICDrivers, ""), "\n"))))
	try(w.File("etc/bootfleet-initramfs", 0o644, []byte("kernel="+res.KernelVersion+"\n")))
	for i, m := range mods {
		data, err := ReadModule(m.Path)
		if err != nil {
			return Result{}, err
		}
		if i == 0 {
			// An initramfs of another architecture's programs would only
			// fail at boot, as the kernel's "exec format error" on /init.
			if err := sameArch(data, m.Name, agentArch, o.Agent, busyboxArch, o.Busybox); err != nil {
				return Result{}, err
			}
		}
		try(w.File("lib/modules/"+m.Name+".ko", 0o644, data))
	}
	try(w.Close())
	if werr != nil {
		return Result{}, fmt.Errorf("write initramfs: %w", werr)
	}
	if res.Compression, err = compress(out, archive.Bytes(), o.Compression, log); err != nil {
		return Result{}, err
	}
	log.Info("initramfs written", "nic_drivers", strings.Join(res.NICDrivers, ","), "cpio_bytes", archive.Len(), "compression", res.Compression)
	return res, nil
}

func countSet(vs ...string) int {
	n := 0
	for _, v := range vs {
		if v != "" {
			n++
		}
	}
	return n
}

// readStatic reads an executable that must run without a dynamic loader,
// since the initramfs has none.
func readStatic(path, what, fix string) ([]byte, elf.Machine, error) {
	if path == "" {
		return nil, 0, fmt.Errorf("no path for %s; %s", what, fix)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w; %s", what, err, fix)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s is not an ELF executable: %w", what, path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, 0, fmt.Errorf("%s %s is dynamically linked; the initramfs has no libc; %s", what, path, fix)
		}
	}
	return data, f.Machine, nil
}

// sameArch checks that the agent and busybox are built for the machine
// the kernel's module (ELF) is: an arm64 kernel package needs
// bootfleet-agent-arm64 (make build) and busybox-static:arm64.
func sameArch(module []byte, name string, agent elf.Machine, agentPath string, busybox elf.Machine, busyboxPath string) error {
	f, err := elf.NewFile(bytes.NewReader(module))
	if err != nil {
		return fmt.Errorf("module %s is not an ELF object: %w", name, err)
	}
	if agent != f.Machine {
		return fmt.Errorf("the agent %s is for %s, the kernel's modules for %s; give --agent the agent built for the kernel's architecture (make build writes bin/bootfleet-agent-arm64 for arm64)", agentPath, agent, f.Machine)
	}
	if busybox != f.Machine {
		return fmt.Errorf("busybox %s is for %s, the kernel's modules for %s; give --busybox a static busybox of the kernel's architecture (busybox-static:arm64 for arm64)", busyboxPath, busybox, f.Machine)
	}
	return nil
}
