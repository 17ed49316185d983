package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identity"
)

const testPrivate = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"

func TestIdentityInstall(t *testing.T) {
	root := t.TempDir()
	for p, c := range map[string]string{
		"etc/passwd":                       "root:x:0:0:root:/root:/bin/bash\nkiosk:x:1001:1002::/home/kiosk:/bin/sh\n",
		"etc/group":                        "root:x:0:\nkiosk:x:1002:\nvideo:x:44:kiosk\n",
		"etc/hostname":                     "debian-image\n",
		"etc/machine-id":                   "11111111111111111111111111111111\n",
		"etc/ssh/ssh_host_ed25519_key":     "image key",
		"etc/ssh/ssh_host_ed25519_key.pub": "image pub",
		"etc/ssh/ssh_host_dsa_key":         "old image key",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/etc", filepath.Join(root, "conf")) // a file placed through a symlink stays in the root
	owners := map[string][2]int{}
	w := identityWriter{root: root, chown: func(p string, uid, gid int) error {
		owners[filepath.Base(p)] = [2]int{uid, gid} // the temporary name; checked by count below
		return nil
	}}
	id := identity.Identity{HostName: "pc1", MachineID: "0123456789abcdef0123456789abcdef",
		HostKeys: []identity.HostKey{{Type: "ed25519", Private: testPrivate, Public: "ssh-ed25519 AAAAC3 root@pc1"}},
		Files: []identity.File{
			{Path: "/home/kiosk/.config/url", Mode: 0o600, Owner: "kiosk", Content: []byte("https://x/\n")},
			{Path: "/conf/motd", Mode: 0o644, Owner: "kiosk:video", Content: []byte("hi\n")},
		}}
	if err := w.install(id); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, content string
		mode          os.FileMode
	}{
		{"etc/hostname", "pc1\n", 0o644},
		{"etc/machine-id", "0123456789abcdef0123456789abcdef\n", 0o444},
		{"etc/ssh/ssh_host_ed25519_key", testPrivate, 0o600},
		{"etc/ssh/ssh_host_ed25519_key.pub", "ssh-ed25519 AAAAC3 root@pc1\n", 0o644},
		{"home/kiosk/.config/url", "https://x/\n", 0o600},
		{"etc/motd", "hi\n", 0o644},
	} {
		b, err := os.ReadFile(filepath.Join(root, tt.path))
		if err != nil || string(b) != tt.content {
			t.Errorf("%s = %q, %v; want %q", tt.path, b, err, tt.content)
			continue
		}
		if fi, _ := os.Stat(filepath.Join(root, tt.path)); fi.Mode().Perm() != tt.mode {
			t.Errorf("%s mode %v, want %v", tt.path, fi.Mode().Perm(), tt.mode)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/ssh/ssh_host_dsa_key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image's dsa key is still there (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "etc", ".bootfleet-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	var kiosk, kioskVideo, rootOwned int
	for _, o := range owners {
		switch o {
		case [2]int{1001, 1002}:
			kiosk++
		case [2]int{1001, 44}:
			kioskVideo++
		case [2]int{0, 0}:
			rootOwned++
		}
	}
	if kiosk != 1 || kioskVideo != 1 || rootOwned != 4 {
		t.Errorf("owners %v: want kiosk's file as 1001:1002, motd as 1001:44, the rest root", owners)
	}

	// An owner the root does not know stops the install.
	bad := identity.Identity{Files: []identity.File{{Path: "/x", Owner: "nobody-here"}}}
	if err := w.install(bad); err == nil || !strings.Contains(err.Error(), "not in the root's /etc/passwd") {
		t.Fatalf("unknown owner: %v", err)
	}
}

func TestFetchIdentity(t *testing.T) {
	var gotAuth, gotQuery string
	body := `{"hostname":"pc1"}`
	status := 200
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotQuery = r.Header.Get("Authorization"), r.URL.RawQuery
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	ctx := context.Background()
	id, err := fetchIdentity(ctx, srv.Client(), srv.URL+"/identity", "m-52-54-00-00-00-01-abc", true)
	if err != nil || id.HostName != "pc1" || gotAuth != "Bootfleet-Root m-52-54-00-00-00-01-abc" || gotQuery != "ssh=1" {
		t.Fatalf("fetch = %+v, %v (auth %q, query %q)", id, err, gotAuth, gotQuery)
	}
	status, body = 403, "refused: wrong secret"
	var refused *identityRefused
	if _, err := fetchIdentity(ctx, srv.Client(), srv.URL, "x", false); !errors.As(err, &refused) || refused.status != 403 || !strings.Contains(err.Error(), "wrong secret") {
		t.Fatalf("refused fetch: %v", err)
	}
	status, body = 200, `{"files":[{"path":"../etc/shadow","mode":420,"content":""}]}`
	if _, err := fetchIdentity(ctx, srv.Client(), srv.URL, "x", false); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("bad identity: %v, want ErrInvalid", err)
	}
}
