package app

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/api"
	"github.com/bootfleet/bootfleet/internal/config"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// needTool skips without the tool, except in CI (BOOTFLEET_CI=1), where
// scripts/deps.sh must have installed it.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("BOOTFLEET_CI") != "" {
			t.Fatalf("%s not installed (libnbd-bin); scripts/deps.sh must install it", name)
		}
		t.Skipf("%s not installed (apt-get install libnbd-bin)", name)
	}
}

// apiCall makes a request of the server at base with token tok and
// returns the body, failing t unless the status is want.
func apiCall(t *testing.T, base, tok, method, path string, body io.Reader, want int) []byte {
	t.Helper()
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, path, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return b
}

// serverAPI waits for the API of the server at base, running c, and
// returns a call to it with its admin token, and the token.
func serverAPI(t *testing.T, base string, c *config.Config) (func(method, path string, body io.Reader, want int) []byte, string) {
	t.Helper()
	waitHTTP(t, base+"/api/v1/openapi.json")
	tok, err := api.ReadToken(filepath.Join(c.Data, api.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return func(method, path string, body io.Reader, want int) []byte {
		t.Helper()
		return apiCall(t, base, tok, method, path, body, want)
	}, tok
}

// linuxRoot gives c's profile linux image debian for root, with overlay.
func linuxRoot(c *config.Config, overlay string) {
	p := c.Profiles["linux"]
	p.Root.Image, p.Root.Overlay = "debian", overlay
	c.Profiles["linux"] = p
}

var rootArgRE = regexp.MustCompile(`bootfleet\.root=nbd:([0-9.]+):([0-9]+):(m-[0-9a-f-]+)`)

// TestDisklessRootOverNBD walks the diskless path end to end on loopback:
// import an image through the API, render a machine's script, read the
// export the script names with libnbd's tools, and see other names refused.
func TestDisklessRootOverNBD(t *testing.T) {
	needTool(t, "nbdinfo")
	needTool(t, "nbdcopy")
	addr := testutil.FreeAddr(t)
	c := testConfig(t, addr)
	linuxRoot(c, "ephemeral")
	logs := startRun(t, c).logs
	base := "http://" + addr
	call, _ := serverAPI(t, base, c)

	// Before the import, the script cannot name a root.
	call("GET", "/ipxe/52-54-00-00-00-01", nil, http.StatusInternalServerError)
	image := make([]byte, 1<<20)
	rand.Read(image) // never fails (crypto/rand)
	var img api.Image
	if err := json.Unmarshal(call("PUT", "/api/v1/images/debian", bytes.NewReader(image), http.StatusCreated), &img); err != nil {
		t.Fatal(err)
	}
	if img.Size != int64(len(image)) {
		t.Fatalf("imported %+v, want %d bytes", img, len(image))
	}
	stored, err := os.ReadFile(filepath.Join(c.Data, "images", "sha256", img.SHA256))
	if err != nil || !bytes.Equal(stored, image) {
		t.Fatalf("DATA/images/sha256/%s: %v, equal %v", img.SHA256, err, bytes.Equal(stored, image))
	}
	// The image is in use by profile linux.
	call("DELETE", "/api/v1/images/debian", nil, http.StatusConflict)

	script := string(call("GET", "/ipxe/52-54-00-00-00-01", nil, http.StatusOK))
	m := rootArgRE.FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("script has no bootfleet.root=nbd:IP:PORT:EXPORT:\n%s", script)
	}
	if m[1] != "127.0.0.1" || !strings.HasPrefix(m[3], "m-52-54-00-00-00-01-") {
		t.Fatalf("bootfleet.root=%s: want server 127.0.0.1 and export m-52-54-00-00-00-01-SECRET", m[0])
	}
	uri := "nbd://127.0.0.1:" + m[2] + "/" + m[3]

	out, err := exec.Command("nbdinfo", "--size", uri).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "1048576" {
		t.Fatalf("nbdinfo --size %s: %v %s, want 1048576", uri, err, out)
	}
	got, err := exec.Command("nbdcopy", uri, "-").Output()
	if err != nil || !bytes.Equal(got, image) {
		t.Fatalf("nbdcopy of the export: %v, %d bytes, equal to the image %v", err, len(got), bytes.Equal(got, image))
	}

	refused := []struct{ name, export string }{
		{"wrong secret", m[3][:len(m[3])-4] + "0000"},
		{"other machine", strings.Replace(m[3], "m-52-54-00-00-00-01-", "m-52-54-00-00-00-02-", 1)},
		{"image name", "debian"},
	}
	for _, r := range refused {
		if r.export == m[3] {
			continue // the secret happened to end in 0000
		}
		out, err := exec.Command("nbdinfo", "nbd://127.0.0.1:"+m[2]+"/"+r.export).CombinedOutput()
		if err == nil {
			t.Errorf("%s: nbdinfo succeeded:\n%s", r.name, out)
		}
	}
	if out, err := exec.Command("nbdinfo", "--list", "nbd://127.0.0.1:"+m[2]).CombinedOutput(); err == nil && strings.Contains(string(out), "m-52") {
		t.Errorf("nbdinfo --list shows the secret export:\n%s", out)
	}
	if !strings.Contains(logs.String(), "nbd export refused") {
		t.Errorf("no refusal logged:\n%s", logs)
	}

	// A new render voids the old export.
	call("GET", "/ipxe/52-54-00-00-00-01", nil, http.StatusOK)
	if out, err := exec.Command("nbdinfo", "--size", uri).CombinedOutput(); err == nil {
		t.Errorf("export of the previous boot still served: %s", out)
	}
	var res api.ResetResult
	if err := json.Unmarshal(call("POST", "/api/v1/machines/52-54-00-00-00-01/reset", nil, http.StatusOK), &res); err != nil {
		t.Fatal(err)
	}
	if res.MAC != "52:54:00:00:00:01" {
		t.Fatalf("reset answered %+v", res)
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, url, func() error {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}
