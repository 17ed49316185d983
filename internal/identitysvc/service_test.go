package identitysvc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/bootfleet/bootfleet/internal/inventory"
	"github.com/bootfleet/bootfleet/internal/inventory/sqlite"
)

var (
	macA = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x52, 0x54, 0, 0, 0, 0xb}
)

func newStore(t *testing.T) inventory.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, m := range []inventory.Machine{{MAC: macA, Name: "pc1", IP: net.IPv4(10, 0, 0, 11)}, {MAC: macB, Name: "pc2"}} {
		if _, err := st.CreateMachine(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func newKey(t *testing.T) *Sealer {
	t.Helper()
	s, err := LoadKey(filepath.Join(t.TempDir(), "identity.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newService(t *testing.T, st inventory.Store, key *Sealer, log *slog.Logger) *Service {
	t.Helper()
	s, err := New(Config{Store: st, Sealer: key, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k", "identity.key")
	if _, err := LoadKey(path, false); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "copy the file") {
		t.Fatalf("LoadKey of a missing file = %v, want ErrNoKey saying what to copy", err)
	}
	s, err := LoadKey(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v, %v; want mode 0600", fi, err)
	}
	again, err := LoadKey(path, true) // the second start reads the same key
	if err != nil || again.ID() != s.ID() {
		t.Fatalf("reloaded key %v, %v; want ID %s", again, err, s.ID())
	}
	sealed := s.Seal(macA, []byte("private"))
	if bytes.Contains(sealed, []byte("private")) {
		t.Fatal("sealed text holds the plain text")
	}
	if got, err := again.Open(macA, sealed); err != nil || string(got) != "private" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(macB, sealed); err == nil {
		t.Fatal("keys sealed for A opened as B's")
	}
	if _, err := newKey(t).Open(macA, sealed); err == nil {
		t.Fatal("keys opened with another fleet's key")
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := LoadKey(path, true); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
		t.Fatalf("LoadKey of a bad file = %v, want the format named", err)
	}
}

// TestIdentity: a machine's keys are made once, the same for every
// server with the fleet's key, different per machine; a server without
// the key refuses, saying why.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	st, key := newStore(t), newKey(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s1, s2 := newService(t, st, key, log), newService(t, st, key, log)
	a, err := s1.Identity(ctx, Request{MAC: macA, HostKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := st.GetMachine(ctx, macA)
	if a.HostName != "pc1" || a.MachineID != m.MachineID || len(a.HostKeys) != 3 {
		t.Fatalf("identity %s %s with %d keys, want pc1 %s with 3", a.HostName, a.MachineID, len(a.HostKeys), m.MachineID)
	}
	for _, k := range a.HostKeys {
		signer, err := ssh.ParsePrivateKey([]byte(k.Private))
		if err != nil {
			t.Fatalf("%s private key does not parse: %v", k.Type, err)
		}
		if got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))); !strings.HasPrefix(k.Public, got) {
			t.Fatalf("%s public key %q is not the private key's %q", k.Type, k.Public, got)
		}
	}
	again, err := s2.Identity(ctx, Request{MAC: macA, HostKeys: true}) // another server
	if err != nil || again.HostKeys[0].Private != a.HostKeys[0].Private {
		t.Fatalf("second server's keys differ (%v)", err)
	}
	b, err := s1.Identity(ctx, Request{MAC: macB, HostKeys: true})
	if err != nil || b.HostKeys[0].Public == a.HostKeys[0].Public || b.MachineID == a.MachineID {
		t.Fatalf("machines A and B share keys or machine-id (%v)", err)
	}
	noSSH, err := s1.Identity(ctx, Request{MAC: macA})
	if err != nil || len(noSSH.HostKeys) != 0 || noSSH.HostName != "pc1" {
		t.Fatalf("identity without ssh: %+v, %v", noSSH, err)
	}
	unknown, err := s1.Identity(ctx, Request{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, HostKeys: true})
	if err != nil || unknown.HostName != "" || unknown.MachineID != "" || len(unknown.HostKeys) != 0 {
		t.Fatalf("unknown machine: %+v, %v; want an empty identity", unknown, err)
	}

	// A server with another key, or none, refuses and says why.
	if _, err := newService(t, st, newKey(t), log).Identity(ctx, Request{MAC: macA, HostKeys: true}); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "same identity.key_file") {
		t.Fatalf("server with another key: %v, want ErrNoKey naming the fix", err)
	}
	noKey, _ := New(Config{Store: st, NoKey: errors.New("no key: copy it")})
	if _, err := noKey.Identity(ctx, Request{MAC: macA, HostKeys: true}); err == nil || !strings.Contains(err.Error(), "copy it") {
		t.Fatalf("server without key: %v", err)
	}
	if _, err := noKey.Rekey(ctx, macA); err == nil {
		t.Fatal("server without key rekeyed")
	}

	// Rekey replaces the keys; known_hosts follows.
	before, _ := s1.KnownHosts(ctx, inventory.MachineFilter{}, nil)
	fps, err := s1.Rekey(ctx, macA)
	if err != nil || len(fps) != 3 || !strings.HasPrefix(fps[0], "SHA256:") {
		t.Fatalf("Rekey = %v, %v", fps, err)
	}
	after, _ := s1.KnownHosts(ctx, inventory.MachineFilter{}, nil)
	rekeyed, _ := s1.Identity(ctx, Request{MAC: macA, HostKeys: true})
	if rekeyed.HostKeys[0].Private == a.HostKeys[0].Private || before == after {
		t.Fatal("Rekey kept the old keys")
	}
	lines := strings.Split(strings.TrimSpace(after), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "pc1,10.0.0.11 ssh-ed25519 ") || !strings.HasPrefix(lines[3], "pc2 ssh-ed25519 ") {
		t.Fatalf("known hosts:\n%s", after)
	}
	one, _ := s1.KnownHosts(ctx, inventory.MachineFilter{}, macB)
	if strings.Count(one, "\n") != 3 || strings.Contains(one, "pc1") {
		t.Fatalf("known hosts of B only:\n%s", one)
	}

	// No private key reached the log.
	for _, k := range append(a.HostKeys, rekeyed.HostKeys...) {
		if body := k.SecretLine(); strings.Contains(logs.String(), body) {
			t.Fatalf("private %s key in the log:\n%s", k.Type, logs.String())
		}
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") || !strings.Contains(logs.String(), "SHA256:") {
		t.Fatalf("log lacks fingerprints or has key material:\n%s", logs.String())
	}
}
