package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// identityAuthScheme is identitysvc.AuthScheme; the agent does not import
// the server's packages.
const identityAuthScheme = "Bootfleet-Root"

// fetchIdentity asks url (bootfleet.identity=, moved to the server that
// serves the root) for the machine's identity, with the root's export
// name as the credential; ssh asks for host keys too. The answer is
// checked as a whole (identity.Decode) before anything is written.
func fetchIdentity(ctx context.Context, c *http.Client, url, export string, ssh bool) (identity.Identity, error) {
	if ssh {
		url += "?ssh=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return identity.Identity{}, err
	}
	req.Header.Set("Authorization", identityAuthScheme+" "+export)
	resp, err := c.Do(req)
	if err != nil {
		return identity.Identity{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, identity.MaxSize+1))
	if err != nil {
		return identity.Identity{}, fmt.Errorf("read identity: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return identity.Identity{}, &identityRefused{status: resp.StatusCode, msg: strings.TrimSpace(string(b))}
	}
	return identity.Decode(b)
}

// identityRefused is the server's refusal; only 5xx are worth a retry.
type identityRefused struct {
	status int
	msg    string
}

func (e *identityRefused) Error() string {
	return fmt.Sprintf("server refused the identity (HTTP %d): %.300s", e.status, e.msg)
}

// identityWriter writes an identity into a mounted root. Each file is
// written beside its place and renamed over it, so the root holds the
// old file or the new one, never half of one. On a read-only root
// (overlay none, bootfleet.ro) a file goes under runDir and bind is asked
// to mount it over the root's, which must exist.
type identityWriter struct {
	root   string
	runDir string
	bind   func(src, dst string) error // nil: read-only roots fail
	chown  func(path string, uid, gid int) error
	warn   func(msg string, args ...any) // nil: discard
}

// install writes id: /etc/hostname, /etc/machine-id, the SSH host keys
// (after removing the image's own) and the files, in that order.
func (w identityWriter) install(id identity.Identity) error {
	// A read-only root without these files still gets the kernel's host
	// name, and systemd makes a transient machine-id for it.
	if id.HostName != "" {
		if err := w.place("/etc/hostname", []byte(id.HostName+"\n"), 0o644, 0, 0); errors.Is(err, errNoTarget) {
			w.warnf("read-only root has no /etc/hostname; only the kernel's host name is set", "err", err)
		} else if err != nil {
			return err
		}
	}
	if id.MachineID != "" {
		if err := w.place("/etc/machine-id", []byte(id.MachineID+"\n"), 0o444, 0, 0); errors.Is(err, errNoTarget) {
			w.warnf("read-only root has no /etc/machine-id; systemd will make a transient one", "err", err)
		} else if err != nil {
			return err
		}
	}
	if len(id.HostKeys) > 0 {
		if err := w.removeImageKeys(); err != nil {
			return err
		}
		for _, k := range id.HostKeys {
			// sshd refuses a private key others can read.
			if err := w.place(identity.PrivatePath(k.Type), []byte(k.Private), 0o600, 0, 0); err != nil {
				return err
			}
			if err := w.place(identity.PublicPath(k.Type), []byte(k.Public+"\n"), 0o644, 0, 0); err != nil {
				return err
			}
		}
	}
	for _, f := range id.Files {
		uid, gid, err := w.owner(f.Owner)
		if err != nil {
			return fmt.Errorf("file %s: %w", f.Path, err)
		}
		if err := w.place(f.Path, f.Content, os.FileMode(f.Mode), uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// removeImageKeys deletes the host keys the image carries, which every
// machine booting it would otherwise share. A read-only root keeps them;
// the machine's own keys are mounted over the ones sshd reads.
func (w identityWriter) removeImageKeys() error {
	dir, err := ResolvePathInRoot(w.root, "/etc/ssh")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(w.root, dir, "ssh_host_*_key*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil && !errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("remove the image's host key %s: %w", strings.TrimPrefix(p, w.root), err)
		}
	}
	return nil
}

// errNoTarget means a read-only root has no file to mount one over.
var errNoTarget = errors.New("the root is read-only and has no such file to mount over")

func (w identityWriter) warnf(msg string, args ...any) {
	if w.warn != nil {
		w.warn(msg, args...)
	}
}

// place writes content to name inside the root with mode and owner.
func (w identityWriter) place(name string, content []byte, mode os.FileMode, uid, gid int) error {
	dir, err := w.dir(path.Dir(name))
	if errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("write %s: %w (nor its directory): add an empty %s to the image", name, errNoTarget, name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	target := filepath.Join(w.root, dir, path.Base(name))
	err = w.writeAt(target, content, mode, uid, gid)
	if !errors.Is(err, syscall.EROFS) {
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	if w.bind == nil {
		return fmt.Errorf("write %s: the root is read-only: %w", name, err)
	}
	if _, err := os.Lstat(target); err != nil {
		return fmt.Errorf("write %s: %w: add an empty %s to the image", name, errNoTarget, name)
	}
	src := filepath.Join(w.runDir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
		return err
	}
	if err := w.writeAt(src, content, mode, uid, gid); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := w.bind(src, target); err != nil {
		return fmt.Errorf("mount %s over the read-only root's: %w", name, err)
	}
	return nil
}

// dir resolves a directory inside the root, making it (0755) when it is
// missing.
func (w identityWriter) dir(d string) (string, error) {
	r, err := ResolvePathInRoot(w.root, d)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Join(w.root, filepath.FromSlash(d)), 0o755); err != nil {
			return "", err
		}
		r, err = ResolvePathInRoot(w.root, d)
	}
	return r, err
}

func (w identityWriter) writeAt(target string, content []byte, mode os.FileMode, uid, gid int) error {
	f, err := os.CreateTemp(filepath.Dir(target), ".bootfleet-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(content)
	if err == nil {
		err = f.Chmod(mode) // after create: the umask does not apply
	}
	if err == nil {
		err = w.chown(tmp, uid, gid)
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// owner resolves USER[:GROUP] with the new root's /etc/passwd and
// /etc/group; a user without a group gets the user's primary group.
func (w identityWriter) owner(s string) (uid, gid int, err error) {
	user, group, err := identity.ParseOwner(s)
	if err != nil {
		return 0, 0, err
	}
	uid, primary, err := w.lookup("/etc/passwd", user, true)
	if err != nil {
		return 0, 0, err
	}
	if group == "" {
		return uid, primary, nil
	}
	gid, _, err = w.lookup("/etc/group", group, false)
	return uid, gid, err
}

// lookup finds name's id (and, in passwd, its primary group) in a
// colon-separated database of the new root; a number is taken as it is.
func (w identityWriter) lookup(db, name string, passwd bool) (id, group int, err error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, n, nil
	}
	f, err := os.Open(filepath.Join(w.root, db))
	if err != nil {
		return 0, 0, fmt.Errorf("owner %s: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 || fields[0] != name {
			continue
		}
		id, err := strconv.Atoi(fields[2])
		if err != nil {
			break
		}
		group = id
		if passwd && len(fields) > 3 {
			if g, err := strconv.Atoi(fields[3]); err == nil {
				group = g
			}
		}
		return id, group, nil
	}
	return 0, 0, fmt.Errorf("owner %s: not in the root's %s; add it to the image or use a number", name, db)
}

// identityAttempts and identityTimeout bound the fetch: the server makes
// a machine's host keys on its first boot, an RSA key among them.
const (
	identityAttempts = 5
	identityTimeout  = 30 * time.Second
)
