package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/rootarg"
)

// installIdentity fetches the machine's identity from the server that
// serves its root and writes it into the new root before switch_root:
// the kernel's host name is set here, so systemd starts with it. It asks
// for SSH host keys only when the root has sshd. Any failure stops the
// boot: a machine that booted with the image's identity would be the
// clone of every other.
func (a *Agent) installIdentity(ctx context.Context, opts Options, s rootarg.Server) error {
	_, err := ResolveInRoot(newRoot, "/usr/sbin/sshd")
	ssh := err == nil
	url := milestonesAt(opts.Identity, s)
	c := &http.Client{Timeout: identityTimeout}
	var id identity.Identity
	for i := range identityAttempts {
		if i > 0 {
			time.Sleep(time.Duration(i) * time.Second)
		}
		id, err = fetchIdentity(ctx, c, url, opts.Root.Export, ssh)
		var refused *identityRefused
		if err == nil || errors.As(err, &refused) && refused.status < 500 || errors.Is(err, identity.ErrInvalid) {
			break
		}
		a.Log.Warn("identity fetch failed", "server", s.Host, "attempt", i+1, "err", err)
	}
	if err != nil {
		return fmt.Errorf("machine identity from %s: %w", s.Host, err)
	}
	if id.HostName != "" {
		if err := unix.Sethostname([]byte(id.HostName)); err != nil {
			return fmt.Errorf("set host name %s: %w", id.HostName, err)
		}
	}
	w := identityWriter{root: newRoot, runDir: "/run/bootfleet/identity",
		bind:  func(src, dst string) error { return unix.Mount(src, dst, "", unix.MS_BIND, "") },
		chown: func(p string, uid, gid int) error { return unix.Lchown(p, uid, gid) },
		warn:  a.Log.Warn}
	if err := w.install(id); err != nil {
		return fmt.Errorf("machine identity: %w", err)
	}
	a.mark("BOOTFLEET-IDENTITY: hostname=%s machine-id=%s ssh-host-keys=%d files=%d sshd=%t",
		orNone(id.HostName), orNone(id.MachineID), len(id.HostKeys), len(id.Files), ssh)
	a.milestone(opts, "agent-identity")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
