package initramfs

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultModules are what the agent needs to reach any root: the NBD
// client, ext4, and virtio_pci, the bus of virtio_net and virtio_blk. The
// NIC drivers come from Options.NICDrivers; the rest of the kernel's
// modules from the root's own /lib/modules once it is mounted.
var DefaultModules = []string{"virtio_pci", "nbd", "ext4"}

// CacheModules are what client-side write caches need: device-mapper
// snapshots, the RAM disk (brd) and the local disks a client-disk cache
// lives on (virtio_blk, nvme; a SATA disk adds ahci and sd_mod with
// Options.ExtraModules). Build adds each one the kernel has, and leaves
// out, with a warning, one it lacks: a kernel without them still boots
// every other kind of root, and the agent says which module a cache
// wanted.
var CacheModules = []string{"dm_snapshot", "brd", "virtio_blk", "nvme"}

// Module is one module to load.
type Module struct {
	Name string // normalized: '-' as '_'
	Path string // .ko, .ko.xz, .ko.zst or .ko.gz under the tree
}

// Tree is one kernel's lib/modules/VERSION directory.
type Tree struct {
	dir     string
	files   map[string]string // normalized name -> path
	builtin map[string]bool
	aliases map[string][]string // alias -> module names, loaded lazily for softdeps
	// builtinAliases maps an alias to the built-in module that provides
	// it (modules.builtin.modinfo): a softdep such a module satisfies
	// needs nothing loaded.
	builtinAliases map[string]string
}

// OpenTree indexes dir, a lib/modules/VERSION directory.
func OpenTree(dir string) (*Tree, error) {
	t := &Tree{dir: dir, files: map[string]string{}, builtin: map[string]bool{}, builtinAliases: map[string]string{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if name, ok := moduleName(d.Name()); ok {
			if _, dup := t.files[name]; !dup {
				t.files[name] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("index kernel modules in %s: %w", dir, err)
	}
	if len(t.files) == 0 {
		return nil, fmt.Errorf("%s has no kernel modules (*.ko*); want a lib/modules/VERSION directory", dir)
	}
	if f, err := os.Open(filepath.Join(dir, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if name, ok := moduleName(filepath.Base(sc.Text())); ok {
				t.builtin[name] = true
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin.modinfo")); err == nil {
		for _, rec := range bytes.Split(b, []byte{0}) {
			key, alias, ok := strings.Cut(string(rec), "=")
			if name, isAlias := strings.CutSuffix(key, ".alias"); ok && isAlias {
				t.builtinAliases[alias] = normalize(name)
			}
		}
	}
	return t, nil
}

func moduleName(file string) (string, bool) {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if base, ok := strings.CutSuffix(file, ext); ok {
			return normalize(base), true
		}
	}
	return "", false
}

func normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// Resolve returns the modules to load for wanted, each after the modules it
// depends on (depends=) and its softdep pre: modules; built-in modules are
// left out. An unresolvable softdep is skipped (softdeps are optional by
// definition); an unknown wanted or depends= module is an error.
func (t *Tree) Resolve(wanted []string) ([]Module, error) {
	var order []Module
	seen := map[string]bool{}
	var add func(name string, chain []string, optional bool) error
	add = func(name string, chain []string, optional bool) error {
		name = normalize(name)
		if seen[name] || t.builtin[name] {
			return nil
		}
		path, ok := t.files[name]
		if !ok {
			if optional {
				return nil
			}
			return fmt.Errorf("module %s (%s) is neither built into the kernel nor in %s", name, strings.Join(append(chain, name), " <- "), t.dir)
		}
		seen[name] = true
		info, err := readModinfo(path)
		if err != nil {
			return err
		}
		chain = append(chain, name)
		for _, dep := range splitList(info["depends"], ",") {
			if err := add(dep, chain, false); err != nil {
				return err
			}
		}
		for _, sd := range info["softdep"] {
			for _, alias := range softdepPre(sd) {
				target, err := t.resolveAlias(alias)
				if err != nil {
					return err
				}
				if err := add(target, chain, true); err != nil {
					return err
				}
			}
		}
		order = append(order, Module{Name: name, Path: path})
		return nil
	}
	for _, w := range wanted {
		if err := add(w, nil, false); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// resolveAlias maps a softdep name ("crypto-crc32c") to a module. A module
// of that name wins; otherwise the first module, generic implementations
// first, that declares it as an alias. Only crypto modules are scanned for
// aliases: that is where the softdeps of the modules we load point, and
// reading every module of a kernel would take seconds.
func (t *Tree) resolveAlias(alias string) (string, error) {
	if _, ok := t.files[normalize(alias)]; ok || t.builtin[normalize(alias)] {
		return alias, nil
	}
	if name, ok := t.builtinAliases[alias]; ok {
		t.builtin[name] = true
		return name, nil
	}
	if t.aliases == nil {
		t.aliases = map[string][]string{}
		for name, path := range t.files {
			if !strings.Contains(path, "/crypto/") {
				continue
			}
			info, err := readModinfo(path)
			if err != nil {
				return "", err
			}
			for _, a := range info["alias"] {
				t.aliases[a] = append(t.aliases[a], name)
			}
		}
		for _, names := range t.aliases {
			// *_generic runs on every CPU; an accelerated variant
			// (crc32c_intel) fails to load where the CPU lacks it, as under
			// QEMU TCG.
			sort.Slice(names, func(i, j int) bool {
				gi, gj := strings.HasSuffix(names[i], "_generic"), strings.HasSuffix(names[j], "_generic")
				if gi != gj {
					return gi
				}
				return names[i] < names[j]
			})
		}
	}
	if names := t.aliases[alias]; len(names) > 0 {
		return names[0], nil
	}
	return alias, nil // optional: add() skips names it cannot find
}

// softdepPre returns the names after "pre:" in a softdep value such as
// "pre: crc32c post: foo".
func softdepPre(v string) []string {
	var out []string
	pre := false
	for _, f := range strings.Fields(v) {
		switch f {
		case "pre:":
			pre = true
		case "post:":
			pre = false
		default:
			if pre {
				out = append(out, f)
			}
		}
	}
	return out
}

func splitList(vs []string, sep string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, sep) {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// readModinfo returns the key=value pairs of a module's .modinfo section.
func readModinfo(path string) (map[string][]string, error) {
	data, err := ReadModule(path)
	if err != nil {
		return nil, err
	}
	return parseModinfo(data, path)
}

func parseModinfo(ko []byte, path string) (map[string][]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, fmt.Errorf("module %s: not an ELF object: %w", path, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", path)
	}
	raw, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: read .modinfo: %w", path, err)
	}
	m := map[string][]string{}
	for _, kv := range bytes.Split(raw, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			m[k] = append(m[k], v)
		}
	}
	return m, nil
}

// ReadModule returns a module's ELF bytes, decompressing .xz, .zst and .gz
// with the xz, zstd and gzip tools: the kernel's finit_module in the agent
// gets a plain .ko, so no decompressor has to be built into the kernel.
func ReadModule(path string) ([]byte, error) {
	var tool string
	switch {
	case strings.HasSuffix(path, ".ko"):
		return os.ReadFile(path)
	case strings.HasSuffix(path, ".xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".zst"):
		tool = "zstd"
	case strings.HasSuffix(path, ".gz"):
		tool = "gzip"
	default:
		return nil, fmt.Errorf("module %s: unknown compression", path)
	}
	out, err := exec.Command(tool, "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("decompress %s with %s (install it: xz-utils, zstd or gzip): %w", path, tool, err)
	}
	return out, nil
}
