package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxSymlinks is the kernel's limit on symlinks followed in one lookup
// (MAXSYMLINKS); more means a loop.
const maxSymlinks = 40

// ResolveInRoot returns the real path, relative to root, of name as a
// process chrooted into root sees it: every symlink on the way is
// followed, absolute ones from root and ".." never above it. This is what
// switch_root and the kernel do with the new root's init; resolving with
// the initramfs as "/" instead breaks merged-/usr systems, whose
// /sbin/init is a symlink to /lib/systemd/systemd through /sbin -> usr/sbin.
// The result must be an executable regular file; the error says what was
// found at each step that failed.
func ResolveInRoot(root, name string) (string, error) {
	resolved, trail, err := walkInRoot(root, name)
	if err != nil {
		return "", initError(name, trail, err)
	}
	st, err := os.Stat(filepath.Join(root, resolved))
	if err != nil {
		return "", initError(name, trail, err)
	}
	if !st.Mode().IsRegular() {
		return "", initError(name, trail, fmt.Errorf("%s is a %s, want an executable file", resolved, kind(st.Mode())))
	}
	if st.Mode().Perm()&0o111 == 0 {
		return "", initError(name, trail, fmt.Errorf("%s is not executable (mode %v)", resolved, st.Mode().Perm()))
	}
	return resolved, nil
}

// ResolvePathInRoot is ResolveInRoot for any existing entry (a directory,
// a kernel image): its real path relative to root.
func ResolvePathInRoot(root, name string) (string, error) {
	resolved, trail, err := walkInRoot(root, name)
	if err == nil {
		_, err = os.Stat(filepath.Join(root, resolved))
	}
	if err != nil {
		via := ""
		if len(trail) > 0 {
			via = " (via " + strings.Join(trail, ", ") + ")"
		}
		return "", fmt.Errorf("%s%s: %w", name, via, err)
	}
	return resolved, nil
}

// walkInRoot follows name's components and symlinks inside root; trail
// lists the symlinks it followed.
func walkInRoot(root, name string) (string, []string, error) {
	if !strings.HasPrefix(name, "/") {
		return "", nil, fmt.Errorf("%q: want an absolute path", name)
	}
	resolved := "/" // what we have walked so far, inside root
	rest := strings.Split(strings.Trim(name, "/"), "/")
	var trail []string // the symlinks followed, for the error
	links := 0
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved) // path.Dir("/") is "/": never above root
			continue
		}
		next := path.Join(resolved, part)
		st, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", trail, fmt.Errorf("%s: %w", next, err)
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if len(rest) > 0 && !st.IsDir() {
				return "", trail, fmt.Errorf("%s is a %s, not a directory", next, kind(st.Mode()))
			}
			resolved = next
			continue
		}
		links++
		if links > maxSymlinks {
			return "", trail, fmt.Errorf("more than %d symlinks: a loop", maxSymlinks)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", trail, err
		}
		trail = append(trail, next+" -> "+target)
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
	}
	return resolved, trail, nil
}

func initError(name string, trail []string, err error) error {
	via := ""
	if len(trail) > 0 {
		via = " (via " + strings.Join(trail, ", ") + ")"
	}
	return fmt.Errorf("the root file system has no usable %s%s: %w; set bootfleet.init= to the init's path in the image, or fix the image", name, via, err)
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		return "pipe or socket"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}
