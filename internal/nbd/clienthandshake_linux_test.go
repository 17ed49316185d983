package nbd

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func socketpair() (*os.File, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "nbd-client"), os.NewFile(uintptr(fds[1]), "nbd-server"), nil
}

// TestClientHandshakeNbdkit is the interop test: nbdkit's strict exportname
// filter only accepts the name we send, on a socketpair (no ports).
func TestClientHandshakeNbdkit(t *testing.T) {
	if _, err := exec.LookPath("nbdkit"); err != nil {
		if os.Getenv("BOOTFLEET_CI") == "1" {
			t.Fatal("BOOTFLEET_CI=1 but nbdkit is not installed; run scripts/deps.sh")
		}
		t.Skip("nbdkit not installed (scripts/deps.sh installs it)")
	}
	for _, tc := range []struct {
		export  string
		wantErr bool
	}{{"good", false}, {"bad", true}} {
		t.Run(tc.export, func(t *testing.T) {
			c := nbdkitPipe(t, "--filter=exportname", "memory", "size=1M", "exportname-strict=true", "exportname=good")
			info, err := ClientHandshake(c, tc.export)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ClientHandshake(%q) = %+v; want a refusal", tc.export, info)
				}
				return
			}
			if err != nil || info.Size != 1<<20 {
				t.Fatalf("ClientHandshake = %+v, %v; want a 1 MiB export", info, err)
			}
		})
	}
}

// nbdkitPipe runs nbdkit -s (serve on stdin/stdout) on one end of a Unix
// socketpair and returns the other end.
func nbdkitPipe(t *testing.T, args ...string) net.Conn {
	t.Helper()
	a, b, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("nbdkit", append([]string{"-s", "--exit-with-parent"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = b, b, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	c, err := net.FileConn(a)
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() {
		c.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("nbdkit stderr:\n%s", stderr.String())
		}
	})
	return c
}
