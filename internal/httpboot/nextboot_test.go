package httpboot

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// memNextBoots is an in-memory NextBoots.
type memNextBoots struct {
	mu   sync.Mutex
	m    map[string]string
	fail bool
}

func (n *memNextBoots) GetNextBoot(_ context.Context, mac net.HardwareAddr) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return "", errors.New("database is down")
	}
	return n.m[mac.String()], nil
}

func (n *memNextBoots) TakeNextBoot(_ context.Context, mac net.HardwareAddr) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.m[mac.String()]
	delete(n.m, mac.String())
	return v, nil
}

type seenMilestones struct {
	mu    sync.Mutex
	names []string
}

func (m *seenMilestones) Milestone(_ net.HardwareAddr, name, _ string) {
	m.mu.Lock()
	m.names = append(m.names, name)
	m.mu.Unlock()
}

// TestNextBootOnce: the override changes one script, then the machine's
// own profile is back; HEAD does not take it; local exits to the disk.
func TestNextBootOnce(t *testing.T) {
	nb := &memNextBoots{m: map[string]string{"52:54:00:12:34:56": "linux"}}
	ms := &seenMilestones{}
	e := newEnvWith(t, func(c *Config) { c.NextBoots, c.Milestones = nb, ms })
	const path = "/ipxe/52-54-00-12-34-56" // pc1, whose profile is rescue

	if resp, _ := e.do(t, "HEAD", path, nil); resp.StatusCode != 200 || nb.m["52:54:00:12:34:56"] != "linux" {
		t.Fatalf("HEAD: status %d, override %q; want 200 and the override still there", resp.StatusCode, nb.m["52:54:00:12:34:56"])
	}
	_, first := e.do(t, "GET", path, nil)
	_, second := e.do(t, "GET", path, nil)
	if !strings.Contains(first, "/profiles/linux/kernel") {
		t.Errorf("first script after next-boot linux:\n%s\nwant profile linux", first)
	}
	if !strings.Contains(second, "rescue host=pc1") {
		t.Errorf("second script:\n%s\nwant pc1's own profile rescue again", second)
	}
	if !strings.Contains(strings.Join(ms.names, " "), MilestoneNextBoot+"linux") {
		t.Errorf("milestones %v, want %slinux in the boot record", ms.names, MilestoneNextBoot)
	}

	nb.m["52:54:00:12:34:56"] = "local"
	if _, body := e.do(t, "GET", path, nil); body != localScript {
		t.Errorf("next-boot local served:\n%s\nwant the exit script", body)
	}
	nb.m["52:54:00:12:34:56"] = "gone-profile"
	if _, body := e.do(t, "GET", path, nil); !strings.Contains(body, "rescue host=pc1") {
		t.Errorf("override naming a removed profile served:\n%s\nwant the machine's own profile", body)
	}
	nb.fail = true
	if resp, body := e.do(t, "GET", path, nil); resp.StatusCode != 200 || !strings.Contains(body, "rescue host=pc1") {
		t.Errorf("store down: %d\n%s\nwant the machine's own boot", resp.StatusCode, body)
	}
	if !strings.Contains(e.logs.String(), "next boot: read the override failed") {
		t.Errorf("no log line for the failed read:\n%s", e.logs.String())
	}
}

// TestNextBootGrub: machines booting through grub take their override
// too, over TFTP and HTTP: local exits to the disk, a profile (of
// either loader) is loaded by grub once.
func TestNextBootGrub(t *testing.T) {
	c, _, _ := grubEnv(t)
	nb := &memNextBoots{m: map[string]string{"52:54:00:00:00:01": "local"}}
	c.NextBoots = nb
	fsys := GrubTFTP(c, noFiles{})
	if got, err := readTFTP(t, fsys, "/grub/52:54:00:00:00:01/grub.cfg"); err != nil || got != localGrub {
		t.Fatalf("grub config over TFTP after next-boot local = %q, %v; want the exit config", got, err)
	}
	if got, _ := readTFTP(t, fsys, "/grub/52:54:00:00:00:01/grub.cfg"); !strings.Contains(got, "/profiles/sb/kernel") {
		t.Fatalf("the next grub config = %q, want profile sb again", got)
	}
	nb.m["52:54:00:00:00:01"] = "linux"
	srv := httptest.NewServer(New(c))
	defer srv.Close()
	for i, want := range []string{"/profiles/linux/kernel", "/profiles/sb/kernel"} {
		resp, err := http.Get(srv.URL + "/grub/52:54:00:00:00:01/grub.cfg")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("grub config %d over HTTP = %q, want %s", i+1, b, want)
		}
	}
}
