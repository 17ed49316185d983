package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/identity"
	"github.com/bootfleet/bootfleet/internal/identitysvc"
	"github.com/bootfleet/bootfleet/internal/inventory"
)

// TestIdentityRoutes runs known-hosts, rekey and files against the real
// identity service, whose machine holds real private keys, and proves
// that no API answer and no audit entry holds any of them.
func TestIdentityRoutes(t *testing.T) {
	e := newEnv(t, false)
	e.mustDo(t, "POST", "/profiles", `{"name":"lab","kernel":"/k"}`, 201, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1","profile":"lab","ip":"10.0.0.50"}`, 201, nil)
	key, err := identitysvc.LoadKey(filepath.Join(t.TempDir(), "identity.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := identitysvc.NewTemplates(map[string]identitysvc.Set{"lab": {Key: "profiles.lab", Vars: map[string]string{"url": "https://x/"},
		Files: []identitysvc.FileSpec{{Path: "/etc/kiosk", Mode: 0o600, Owner: "kiosk", Template: "{{.Vars.url}} {{.Name}}\n"},
			{Path: "/etc/hosts", Mode: 0o644, Template: "{{.IP}} {{.Name}}\n"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := identitysvc.New(identitysvc.Config{Store: e.store, Sealer: key, Files: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	mac, _ := inventory.ParseMAC("52:54:00:00:00:01")
	first, err := ids.Identity(context.Background(), identitysvc.Request{MAC: mac, HostKeys: true}) // its first boot
	if err != nil {
		t.Fatal(err)
	}
	e.serveIdentities(t, ids)

	var kh KnownHosts
	e.mustDo(t, "GET", "/known-hosts?profile=lab&machine=pc1", "", 200, &kh)
	if lines := strings.Split(strings.TrimSpace(kh.KnownHosts), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "pc1,10.0.0.50 ssh-ed25519 AAAA") {
		t.Fatalf("known hosts %q", kh.KnownHosts)
	}
	e.mustDo(t, "GET", "/known-hosts?profile=other", "", 200, &kh)
	if kh.KnownHosts != "" {
		t.Fatalf("known hosts of another profile: %q", kh.KnownHosts)
	}
	e.mustDo(t, "GET", "/known-hosts?machine=pc9", "", 404, nil)

	var files RenderedFiles
	e.mustDo(t, "GET", "/machines/pc1/files?path=/etc/kiosk", "", 200, &files)
	if len(files.Files) != 1 || files.Files[0].Mode != "0600" || files.Files[0].Content != "https://x/ pc1\n" || files.Files[0].Owner != "kiosk" {
		t.Fatalf("files: %+v", files)
	}
	var rk RekeyResult
	e.mustDo(t, "POST", "/machines/pc1/rekey", "", 200, &rk)
	if rk.MAC != "52:54:00:00:00:01" || len(rk.Fingerprints) != 3 || !strings.HasPrefix(rk.Fingerprints[0], "SHA256:") {
		t.Fatalf("rekey: %+v", rk)
	}
	second, err := ids.Identity(context.Background(), identitysvc.Request{MAC: mac, HostKeys: true})
	if err != nil || second.HostKeys[0].Private == first.HostKeys[0].Private {
		t.Fatalf("rekey kept the keys (%v)", err)
	}

	// Nothing the API answers, the audit trail included, holds a key.
	for _, p := range []string{"/machines", "/machines/pc1", "/known-hosts", "/machines/pc1/files", "/events", "/audit"} {
		var raw json.RawMessage
		e.mustDo(t, "GET", p, "", 200, &raw)
		for _, k := range append(first.HostKeys, second.HostKeys...) {
			if strings.Contains(string(raw), "PRIVATE KEY") || strings.Contains(string(raw), k.SecretLine()) || k.SecretLine() == "" {
				t.Fatalf("GET %s holds a private key: %s", p, raw)
			}
		}
	}
	var trail AuditList
	e.mustDo(t, "GET", "/audit", "", 200, &trail)
	if b, _ := json.Marshal(trail); !strings.Contains(string(b), "new ssh host keys") {
		t.Fatalf("the rekey is not in the audit trail: %s", b)
	}

	// A server without the key says why, with 503.
	noKey, _ := identitysvc.New(identitysvc.Config{Store: e.store, NoKey: errors.Join(identity.ErrNoKey, errors.New("copy /var/lib/bootfleet/identity.key"))})
	e.serveIdentities(t, noKey)
	var eb ErrorBody
	if got, _ := e.do(t, "POST", "/machines/pc1/rekey", bearer, "", &eb); got != 503 || !strings.Contains(eb.Error, "copy /var/lib/bootfleet/identity.key") {
		t.Fatalf("rekey without a key: %d %q, want 503 saying what to copy", got, eb.Error)
	}
}

type resetDisks struct{ reset []string }

func (d *resetDisks) Reset(mac net.HardwareAddr, force bool) error {
	d.reset = append(d.reset, mac.String())
	return nil
}

// TestResetKeepsMachineID: machine reset discards the overlay and keeps
// the machine-id; rm and add again makes a new one.
func TestResetKeepsMachineID(t *testing.T) {
	e := newEnv(t, false)
	disks := &resetDisks{}
	h, err := New(Config{Store: e.store, Token: token, Disks: disks})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	var before, after, again Machine
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, 201, &before)
	e.mustDo(t, "POST", "/machines/pc1/reset", "", 200, nil)
	e.mustDo(t, "GET", "/machines/pc1", "", 200, &after)
	if len(disks.reset) != 1 || before.MachineID == "" || after.MachineID != before.MachineID {
		t.Fatalf("after reset machine-id %q, want %q kept (resets %v)", after.MachineID, before.MachineID, disks.reset)
	}
	e.mustDo(t, "DELETE", "/machines/pc1", "", 204, nil)
	e.mustDo(t, "POST", "/machines", `{"mac":"52:54:00:00:00:01","name":"pc1"}`, 201, &again)
	if again.MachineID == "" || again.MachineID == before.MachineID {
		t.Fatalf("machine added again got machine-id %q, want a new one (old %s)", again.MachineID, before.MachineID)
	}
}
