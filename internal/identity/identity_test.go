package identity

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const priv = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"

func good() Identity {
	return Identity{HostName: "pc1", MachineID: "0123456789abcdef0123456789abcdef",
		HostKeys: []HostKey{{Type: KeyEd25519, Private: priv, Public: "ssh-ed25519 AAAAC3Nz"}},
		Files:    []File{{Path: "/etc/motd", Mode: 0o644, Content: []byte("hi\n")}, {Path: "/home/kiosk/url", Mode: 0o600, Owner: "kiosk:kiosk"}}}
}

func TestRoundTrip(t *testing.T) {
	b, err := Encode(good())
	if err != nil {
		t.Fatal(err)
	}
	id, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if id.HostName != "pc1" || len(id.Files) != 2 || string(id.Files[0].Content) != "hi\n" || id.HostKeys[0].Private != priv {
		t.Fatalf("round trip: %+v", id)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(*Identity)
		want string
	}{
		{"host name", func(id *Identity) { id.HostName = "pc_1" }, "hostname"},
		{"machine-id", func(id *Identity) { id.MachineID = "00000000000000000000000000000000" }, "machine_id"},
		{"key type", func(id *Identity) { id.HostKeys[0].Type = "dsa" }, "type"},
		{"two keys of a type", func(id *Identity) { id.HostKeys = append(id.HostKeys, id.HostKeys[0]) }, "two ssh host keys"},
		{"private key", func(id *Identity) { id.HostKeys[0].Private = "secret" }, "not an OpenSSH private key"},
		{"public key", func(id *Identity) { id.HostKeys[0].Public = "ssh-rsa AAAA" }, "public key"},
		{"relative path", func(id *Identity) { id.Files[0].Path = "etc/motd" }, "absolute"},
		{"dot-dot path", func(id *Identity) { id.Files[0].Path = "/etc/../../x" }, "clean"},
		{"root", func(id *Identity) { id.Files[0].Path = "/" }, "absolute"},
		{"mode", func(id *Identity) { id.Files[0].Mode = 0o10000 }, "mode"},
		{"owner", func(id *Identity) { id.Files[0].Owner = "a b" }, "owner"},
		{"empty group", func(id *Identity) { id.Files[0].Owner = "kiosk:" }, "owner"},
		{"twice", func(id *Identity) { id.Files[1].Path = "/etc/motd" }, "twice"},
		{"big", func(id *Identity) { id.Files[0].Content = make([]byte, MaxFileSize+1) }, "bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := good()
			tt.mod(&id)
			b, _ := Encode(id)
			_, err := Decode(b)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode = %v, want ErrInvalid saying %q", err, tt.want)
			}
		})
	}
	for _, b := range []string{``, `[]`, `{"hostname":"a"} {}`, `{"colour":1}`} {
		if _, err := Decode([]byte(b)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Decode(%q) = %v, want ErrInvalid", b, err)
		}
	}
}

// TestKeysNotPrinted: a host key that reaches a log line or a %v shows
// its public half only.
func TestKeysNotPrinted(t *testing.T) {
	k := good().HostKeys[0]
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("x", "key", k, "keys", good().HostKeys)
	fmt.Fprintf(&sb, "%v %+v %s", k, k, k)
	if strings.Contains(sb.String(), "PRIVATE") || strings.Contains(sb.String(), "b3BlbnNzaC1rZXktdjEAAAAA") {
		t.Fatalf("private key printed: %s", sb.String())
	}
}

func TestParseOwner(t *testing.T) {
	for in, want := range map[string]string{"": "root:", "kiosk": "kiosk:", "kiosk:users": "kiosk:users", "1000:1000": "1000:1000"} {
		u, g, err := ParseOwner(in)
		if err != nil || u+":"+g != want {
			t.Errorf("ParseOwner(%q) = %q %q %v, want %s", in, u, g, err, want)
		}
	}
}

func TestSecretLine(t *testing.T) {
	k := HostKey{Type: KeyEd25519, Public: "ssh-ed25519 PUBLICPART", Private: "-----BEGIN OPENSSH PRIVATE KEY-----\nPUBLICPART\nsecretsecret\n-----END OPENSSH PRIVATE KEY-----\n"}
	if got := k.SecretLine(); got != "secretsecret" {
		t.Fatalf("SecretLine = %q, want the line the public key lacks", got)
	}
}
