package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

var imageKernelRE = regexp.MustCompile(`kernel (http://[^ ]+/images/([0-9a-f]{64})/vmlinuz\?mac=[^ ]+) initrd=initrd\.img .*bootfleet\.root=nbd:`)

// TestImageKernelBoot serves a root.kernel: image profile end to end: an
// image import starts the build of its kernel and initramfs in the
// background, the script names them by the content's sha256, and a new
// version of the image brings its own kernel.
func TestImageKernelBoot(t *testing.T) {
	testutil.NeedImageMount(t)
	addr := testutil.FreeAddr(t)
	c := testConfig(t, addr)
	c.NBD.Agent = "/bin/busybox" // a static binary standing in for bootfleet-agent
	p := c.Profiles["linux"]
	p.Kernel, p.Root.Image, p.Root.Overlay, p.Root.Kernel = "", "debian", "ephemeral", "image"
	c.Profiles["linux"] = p
	logs := startRun(t, c).logs
	base := "http://" + addr
	call, _ := serverAPI(t, base, c)
	importImage := func(version string, want int) (string, []byte) {
		t.Helper()
		raw, vmlinuz := testutil.KernelImage(t, version, nil)
		f, err := os.Open(raw)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var img api.Image
		if err := json.Unmarshal(call("PUT", "/api/v1/images/debian", f, want), &img); err != nil {
			t.Fatal(err)
		}
		return img.SHA256, vmlinuz
	}

	for _, v := range []struct {
		version string
		status  int
	}{{"9.9.1-test", http.StatusCreated}, {"9.9.2-test", http.StatusOK}} {
		version := v.version
		sha, vmlinuz := importImage(version, v.status)
		// The import started the build: the files appear without a request.
		waitFile(t, filepath.Join(c.Data, "kernels", sha, "initrd.img"))
		script := string(call("GET", "/ipxe/52-54-00-00-00-01", nil, http.StatusOK))
		m := imageKernelRE.FindStringSubmatch(script)
		if m == nil || m[2] != sha {
			t.Fatalf("version %s: script does not boot /images/%s/vmlinuz with initrd=initrd.img and bootfleet.root=:\n%s", version, sha, script)
		}
		if got := call("GET", strings.TrimPrefix(m[1], base), nil, http.StatusOK); !bytes.Equal(got, vmlinuz) {
			t.Fatalf("version %s: vmlinuz is %d bytes, want the image's %d", version, len(got), len(vmlinuz))
		}
		unxz := exec.Command("xz", "-dc") // xz, the default compression
		unxz.Stdin = bytes.NewReader(call("GET", "/images/"+sha+"/initrd.img", nil, http.StatusOK))
		rd, err := unxz.Output()
		if err != nil {
			t.Fatalf("version %s: read the initramfs: %v", version, err)
		}
		if !bytes.Contains(rd, []byte("kernel="+version+"\n")) {
			t.Fatalf("version %s: the initramfs was not built for kernel %s", version, version)
		}
		if !strings.Contains(logs.String(), `msg="image kernel built" image=debian sha256=`+sha+` kernel=`+version) {
			t.Fatalf("no build log line for %s:\n%s", version, logs)
		}
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, path, func() error {
		_, err := os.Stat(path)
		return err
	})
}
