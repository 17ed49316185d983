// Package safefs resolves client-supplied file names (from TFTP and HTTP
// requests) against a list of read-only root directories, and opens only
// regular files that stay inside one of them.
//
// Name rules, applied before the file system is touched:
//
//   - One leading "/" is stripped: TFTP clients and firmware often ask for
//     "/pxelinux.0" and mean "pxelinux.0" inside the served root. The rest
//     is always resolved relative to a root, so "/etc/passwd" looks for
//     ROOT/etc/passwd and never for the host's /etc/passwd. A second leading
//     slash ("//etc/passwd") is refused.
//   - ".." components, backslashes, NUL bytes and control characters
//     (0x00-0x1f, 0x7f) are refused with ErrForbidden.
//
// Resolution uses Linux openat2(2) with RESOLVE_BENEATH and
// RESOLVE_NO_MAGICLINKS on a directory descriptor held for each root, so the
// kernel itself refuses symlinks (and ".." hidden behind symlinks) that leave
// the root, including absolute symlinks even when they point back inside.
// Symlinks that stay inside the root are followed. Only regular files are
// opened: directories, devices, FIFOs and sockets are refused without being
// opened for reading, so opening cannot block or trigger device side effects.
//
// Roots are searched in order and the first root in which the name exists
// decides: if that entry is forbidden (a directory, an escaping symlink, a
// device), later roots are not consulted. Other platforms are not supported:
// New returns an error there.
package safefs
