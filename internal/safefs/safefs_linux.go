package safefs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

func openRoot(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("safefs: root %q is not a directory; point it at the directory holding the boot files", p)
		}
		return nil, fmt.Errorf("safefs: root %q: %w; create it or fix the configured path", p, err)
	}
	d := os.NewFile(uintptr(fd), p)
	// Probe openat2 once so an old kernel fails at startup, not per request.
	probe, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveFlags})
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("safefs: openat2 on root %q: %w (Linux 5.6 or newer is required)", p, err)
	}
	unix.Close(probe)
	return d, nil
}

// openBeneath opens rel inside rt. It first opens an O_PATH descriptor to
// check the file type without opening devices or FIFOs for reading, then
// reopens the name for reading and checks it is still the same inode, so a
// rename between the two steps cannot slip a different file through.
func openBeneath(rt root, rel string) (*os.File, error) {
	dirfd := int(rt.dir.Fd())
	var st1 unix.Stat_t
	pfd, err := openat2(dirfd, rel, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return nil, mapErr(rt, rel, err)
	}
	err = unix.Fstat(pfd, &st1)
	unix.Close(pfd)
	if err != nil {
		return nil, fmt.Errorf("safefs: stat %q in %q: %w", rel, rt.path, err)
	}
	if err := checkRegular(rt, rel, st1.Mode); err != nil {
		return nil, err
	}
	fd, err := openat2(dirfd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC)
	if err != nil {
		return nil, mapErr(rt, rel, err)
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("safefs: stat %q in %q: %w", rel, rt.path, err)
	}
	if st2.Dev != st1.Dev || st2.Ino != st1.Ino {
		unix.Close(fd)
		return nil, fmt.Errorf("%q in root %q: changed while being opened: %w", rel, rt.path, ErrForbidden)
	}
	if err := checkRegular(rt, rel, st2.Mode); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// O_NONBLOCK only guarded the open; reads of regular files ignore it,
	// but clear it so the descriptor behaves like any other os.File.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("safefs: %q in %q: %w", rel, rt.path, err)
	}
	return os.NewFile(uintptr(fd), rt.path+"/"+rel), nil
}

func openat2(dirfd int, rel string, flags uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: flags, Resolve: resolveFlags})
		if err == unix.EINTR || err == unix.EAGAIN {
			// EAGAIN: a concurrent rename raced RESOLVE_BENEATH's checks.
			continue
		}
		return fd, err
	}
}

func checkRegular(rt root, rel string, mode uint32) error {
	var kind string
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		kind = "a directory"
	case unix.S_IFCHR, unix.S_IFBLK:
		kind = "a device"
	case unix.S_IFIFO:
		kind = "a FIFO"
	case unix.S_IFSOCK:
		kind = "a socket"
	default:
		kind = "not a regular file"
	}
	return fmt.Errorf("%q in root %q is %s; only regular files are served: %w", rel, rt.path, kind, ErrForbidden)
}

func mapErr(rt root, rel string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return errNoEntry
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%q resolves outside root %q (symlink leaving the root, or an absolute symlink): %w", rel, rt.path, ErrForbidden)
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%q in root %q: too many or magic symlinks: %w", rel, rt.path, ErrForbidden)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%q in root %q: permission denied by the OS (check file modes): %w", rel, rt.path, ErrForbidden)
	case errors.Is(err, unix.ENAMETOOLONG):
		return fmt.Errorf("%q: name too long: %w", rel, ErrForbidden)
	}
	return fmt.Errorf("safefs: open %q in %q: %w", rel, rt.path, err)
}
