package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Identity is one machine's identity for one boot.
type Identity struct {
	// HostName is the machine's name in the inventory; empty for none.
	HostName string `json:"hostname,omitempty"`
	// MachineID is its systemd machine-id; empty when the inventory has
	// none (a machine that is not stored), and /etc/machine-id is left alone.
	MachineID string `json:"machine_id,omitempty"`
	// HostKeys are its SSH host keys, one per type; empty when the agent
	// did not ask (the image has no sshd).
	HostKeys []HostKey `json:"ssh_host_keys,omitempty"`
	// Files are written into the new root after everything else.
	Files []File `json:"files,omitempty"`
}

// Key types, as in the file names sshd reads (/etc/ssh/ssh_host_TYPE_key).
const (
	KeyEd25519 = "ed25519"
	KeyECDSA   = "ecdsa"
	KeyRSA     = "rsa"
)

// KeyTypes are the types a machine gets, as Debian's openssh-server makes.
var KeyTypes = []string{KeyEd25519, KeyECDSA, KeyRSA}

// publicPrefix is how each type's public key line starts.
var publicPrefix = map[string]string{KeyEd25519: "ssh-ed25519 ", KeyECDSA: "ecdsa-sha2-", KeyRSA: "ssh-rsa "}

// HostKey is one SSH host key pair. Its String and LogValue leave the
// private key out, so a key logged by mistake gives nothing away.
type HostKey struct {
	Type    string `json:"type"`    // one of KeyTypes
	Private string `json:"private"` // OpenSSH private key file (PEM)
	Public  string `json:"public"`  // authorized_keys line
}

// String is the key's type and public half.
func (k HostKey) String() string { return k.Type + " " + k.Public }

// LogValue implements slog.LogValuer: the type and public half only.
func (k HostKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// SecretLine is the longest line of k's private key file that its public
// key does not hold (OpenSSH's format embeds the public key): a string no
// log line, listing or answer may contain, for the tests that look.
func (k HostKey) SecretLine() string {
	best := ""
	for _, l := range strings.Split(k.Private, "\n") {
		if len(l) > len(best) && !strings.HasPrefix(l, "-----") && !strings.Contains(k.Public, l) {
			best = l
		}
	}
	return best
}

// PrivatePath and PublicPath are where sshd reads a key of type t.
func PrivatePath(t string) string { return "/etc/ssh/ssh_host_" + t + "_key" }
func PublicPath(t string) string  { return PrivatePath(t) + ".pub" }

// File is one rendered file.
type File struct {
	Path string `json:"path"` // absolute and clean
	Mode uint32 `json:"mode"` // permission bits, at most 07777
	// Owner is USER or USER:GROUP, names (looked up in the new root's
	// /etc/passwd and /etc/group) or numbers; empty for root.
	Owner   string `json:"owner,omitempty"`
	Content []byte `json:"content"`
}

// Limits Decode enforces.
const (
	MaxFiles    = 256
	MaxFileSize = 1 << 20
	MaxSize     = 16 << 20 // the whole encoded identity
)

// ErrInvalid is wrapped by every error Decode returns.
var ErrInvalid = errors.New("identity: invalid")

// ErrNoKey means a server has no identity key (or another one than the
// fleet's): it cannot make or hand out SSH host keys.
var ErrNoKey = errors.New("identity: no identity key")

// Encode is the wire form of id.
func Encode(id Identity) ([]byte, error) { return json.Marshal(id) }

// Decode parses and checks an identity as the agent receives it.
func Decode(b []byte) (Identity, error) {
	var id Identity
	if len(b) > MaxSize {
		return id, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(b), MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&id); err != nil {
		return Identity{}, fmt.Errorf("%w: not the JSON of an identity: %v", ErrInvalid, err)
	}
	if dec.More() {
		return Identity{}, fmt.Errorf("%w: data after the JSON object", ErrInvalid)
	}
	if err := id.Check(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// Check says what in id the agent must not write.
func (id Identity) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	if id.HostName != "" {
		if why := inventory.CheckHostName(id.HostName); why != "" {
			return bad("hostname %q: %s", id.HostName, why)
		}
	}
	if id.MachineID != "" {
		if why := inventory.CheckMachineID(id.MachineID); why != "" {
			return bad("machine_id %q: %s", id.MachineID, why)
		}
	}
	seen := map[string]bool{}
	for _, k := range id.HostKeys {
		prefix, ok := publicPrefix[k.Type]
		switch {
		case !ok:
			return bad("ssh host key type %q: want ed25519, ecdsa or rsa", k.Type)
		case seen[k.Type]:
			return bad("two ssh host keys of type %s", k.Type)
		case !strings.HasPrefix(k.Private, "-----BEGIN OPENSSH PRIVATE KEY-----\n"):
			return bad("ssh host key %s: private key is not an OpenSSH private key file", k.Type)
		case !strings.HasPrefix(k.Public, prefix) || strings.ContainsAny(k.Public, "\r\n"):
			return bad("ssh host key %s: public key is not one %s... line", k.Type, prefix)
		}
		seen[k.Type] = true
	}
	if len(id.Files) > MaxFiles {
		return bad("%d files, at most %d", len(id.Files), MaxFiles)
	}
	paths := map[string]bool{}
	for _, f := range id.Files {
		if err := f.check(); err != nil {
			return bad("file %.80q: %v", f.Path, err)
		}
		if paths[f.Path] {
			return bad("file %s listed twice", f.Path)
		}
		paths[f.Path] = true
	}
	return nil
}

func (f File) check() error {
	switch {
	case !strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) != f.Path || f.Path == "/":
		return errors.New("want an absolute, clean path to a file")
	case strings.ContainsRune(f.Path, 0):
		return errors.New("NUL in the path")
	case f.Mode > 0o7777:
		return fmt.Errorf("mode %#o: want permission bits, at most 07777", f.Mode)
	case len(f.Content) > MaxFileSize:
		return fmt.Errorf("%d bytes, at most %d", len(f.Content), MaxFileSize)
	}
	if _, _, err := ParseOwner(f.Owner); err != nil {
		return err
	}
	return nil
}

// ParseOwner splits USER[:GROUP]; empty is root. Each part is a name
// (letters, digits, . _ -, not starting with -) or a number.
func ParseOwner(s string) (user, group string, err error) {
	if s == "" {
		return "root", "", nil
	}
	user, group, hasGroup := strings.Cut(s, ":")
	parts := []string{user}
	if hasGroup {
		parts = append(parts, group)
	}
	for _, p := range parts {
		if p == "" || len(p) > 32 || p[0] == '-' || strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			return "", "", fmt.Errorf("owner %q: want USER or USER:GROUP, as names or numbers", s)
		}
	}
	return user, group, nil
}
