package httpboot

import (
	"bytes"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/machineview"
	"github.com/bootfleet/bootfleet/internal/testutil"
)

// dirOpener serves one directory and refuses any name with "..": enough for
// these tests; the real confinement rules are package safefs's and tested there.
type dirOpener string

func (d dirOpener) Open(name string) (*os.File, error) {
	if strings.Contains(name, "..") {
		return nil, fs.ErrPermission
	}
	return os.Open(filepath.Join(string(d), name))
}

// newView is the fleet view of in, as the inventory would give it.
func newView(t *testing.T, in machineview.Input) *machineview.View {
	t.Helper()
	v, err := machineview.New(in)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// enrolled is a machine an admin listed.
func enrolled(mac, name, profile string) machineview.Machine {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		panic(err)
	}
	return machineview.Machine{MAC: hw, Name: name, Profile: profile, Enrolled: true}
}

type env struct {
	srv    *httptest.Server
	logs   *testutil.SyncBuffer
	kernel []byte
}

// openBoot is a BootClock with one boot open: mac's, which took took.
type openBoot struct {
	mac  net.HardwareAddr
	took time.Duration
}

func (b openBoot) Complete(mac net.HardwareAddr) (time.Duration, bool) {
	if !bytes.Equal(mac, b.mac) {
		return 0, false
	}
	return b.took, true
}

func newEnv(t *testing.T) *env { t.Helper(); return newEnvWith(t, nil) }

// newEnvWith is newEnv with edit applied to the handler's Config.
func newEnvWith(t *testing.T, edit func(*Config)) *env {
	t.Helper()
	dir := t.TempDir()
	kernel := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	os.WriteFile(filepath.Join(dir, "vmlinuz"), kernel, 0o644)
	os.WriteFile(filepath.Join(dir, "initrd.img"), []byte("initrd"), 0o644)
	files := filepath.Join(dir, "files")
	os.MkdirAll(files, 0o755)
	os.WriteFile(filepath.Join(files, "ipxe.efi"), []byte("EFI"), 0o644)
	v := newView(t, machineview.Input{
		Profiles: map[string]inventory.Profile{
			"linux": {Name: "linux", Kernel: filepath.Join(dir, "vmlinuz"), Initrd: []string{filepath.Join(dir, "initrd.img")},
				Cmdline: "console=ttyS0 done={{ .DoneURL }}"},
			"rescue": {Name: "rescue", Kernel: "http://mirror.example/vmlinuz", Cmdline: "rescue host={{ .Name }}"},
			"broken": {Name: "broken", Kernel: "/k", Cmdline: "{{ .Nope }}"},
		},
		Machines:       []machineview.Machine{enrolled("52:54:00:12:34:56", "pc1", "rescue"), enrolled("52:54:00:00:00:0b", "bad", "broken")},
		DefaultProfile: "linux",
		UnknownProfile: "linux",
	})
	e := &env{logs: &testutil.SyncBuffer{}, kernel: kernel}
	mac, _ := net.ParseMAC("52:54:00:aa:bb:cc")
	hc := Config{
		Files: dirOpener(files), Fleet: v, Boots: openBoot{mac, 31500 * time.Millisecond},
		BaseURL: "http://10.0.0.1:8080", ServerIP: "10.0.0.1",
		Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
	}
	if edit != nil {
		edit(&hc)
	}
	h := New(hc)
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) do(t *testing.T, method, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRoutes(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		code               int
		body               string // substring
	}{
		{"default profile script", "GET", "/ipxe/52-54-00-aa-bb-cc", nil, 200,
			"kernel http://10.0.0.1:8080/profiles/linux/kernel?mac=52-54-00-aa-bb-cc initrd=initrd.img console=ttyS0 done=http://10.0.0.1:8080/done/52-54-00-aa-bb-cc"},
		{"colon mac", "GET", "/ipxe/52:54:00:aa:bb:cc", nil, 200, "initrd --name initrd.img http://10.0.0.1:8080/profiles/linux/initrd/0/initrd.img?mac=52-54-00-aa-bb-cc"},
		{"machine profile", "GET", "/ipxe/52-54-00-12-34-56", nil, 200, "kernel http://mirror.example/vmlinuz rescue host=pc1"},
		{"bad mac", "GET", "/ipxe/nope", nil, 400, "want a MAC"},
		{"broken template", "GET", "/ipxe/52-54-00-00-00-0b", nil, 500, "profile broken: cmdline template"},
		{"kernel", "GET", "/profiles/linux/kernel", nil, 200, "0123456789abcdef0123"},
		{"kernel range", "GET", "/profiles/linux/kernel", map[string]string{"Range": "bytes=16-31"}, 206, "0123456789abcdef"},
		{"initrd", "GET", "/profiles/linux/initrd/0/initrd.img", nil, 200, "initrd"},
		{"initrd index out of range", "GET", "/profiles/linux/initrd/1/x", nil, 404, "has 1 initrds"},
		{"unknown profile", "GET", "/profiles/nope/kernel", nil, 404, "no profile named nope"},
		{"url kernel redirects", "GET", "/profiles/rescue/kernel", nil, 0, ""},
		{"file", "GET", "/files/ipxe.efi", nil, 200, "EFI"},
		{"file missing", "GET", "/files/nope.efi", nil, 404, ""},
		{"file traversal", "GET", "/files/a/..%2f..%2fetc/passwd", nil, 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.code == 0 {
				req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, nil)
				resp, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://mirror.example/vmlinuz" {
					t.Fatalf("got %d %q", resp.StatusCode, resp.Header.Get("Location"))
				}
				return
			}
			resp, body := e.do(t, tt.method, tt.path, tt.hdr)
			if resp.StatusCode != tt.code {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.code, body)
			}
			if !strings.Contains(body, tt.body) {
				t.Fatalf("body %q does not contain %q", body, tt.body)
			}
		})
	}
}

func TestHeadHasLengthAndNoBody(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, "HEAD", "/profiles/linux/kernel", nil)
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != int64(len(e.kernel)) {
		t.Fatalf("HEAD: %d len %d body %q", resp.StatusCode, resp.ContentLength, body)
	}
}

func TestDoneLogsBootComplete(t *testing.T) {
	e := newEnv(t)
	resp, _ := e.do(t, "GET", "/done/52-54-00-aa-bb-cc", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, `msg="boot complete" mac=52:54:00:aa:bb:cc`) || !strings.Contains(logs, "seconds=31.5") {
		t.Fatalf("log lacks boot complete with seconds=31.5:\n%s", logs)
	}
	e.do(t, "GET", "/done/52-54-00-aa-bb-dd", nil)
	want := `msg="boot complete" mac=52:54:00:aa:bb:dd name="" seconds="unknown (no DHCP seen for this boot)"`
	if logs := e.logs.String(); !strings.Contains(logs, want) {
		t.Fatalf("log lacks %s:\n%s", want, logs)
	}
}

// The server logs a file once it has sent all of it, which can be after
// the client has read the last byte: the test waits for the line.
func TestFileSentIsLoggedWithBytes(t *testing.T) {
	e := newEnv(t)
	e.do(t, "GET", "/profiles/linux/kernel?mac=52-54-00-aa-bb-cc", nil)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.logs.String(), `msg="file sent"`) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for _, want := range []string{`msg="file sent" mac=52:54:00:aa:bb:cc`, "bytes=65536"} {
		if !strings.Contains(e.logs.String(), want) {
			t.Fatalf("log lacks %s:\n%s", want, e.logs.String())
		}
	}
}

// TestJoinSlashes: shim's /files//grubx64.efi is served, not redirected
// (UEFI HTTP clients do not follow redirects), behind a ServeMux as in
// the server.
func TestJoinSlashes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /files/{path...}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.PathValue("path")) })
	srv := httptest.NewServer(JoinSlashes(mux))
	defer srv.Close()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for p, want := range map[string]string{"/files//grubx64.efi": "grubx64.efi", "//files///a//b.efi": "a/b.efi", "/files/ipxe.efi": "ipxe.efi"} {
		resp, err := c.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("GET %s = %d %q, want 200 %q", p, resp.StatusCode, b, want)
		}
	}
}
