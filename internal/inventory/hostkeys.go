package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"time"
)

// NewMachineID draws a machine-id as systemd writes one (machine-id(5)):
// 32 lower-case hex digits of a random version 4 UUID.
func NewMachineID() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b)
}

// CheckMachineID says why s is not a machine-id, or "" when it is one.
func CheckMachineID(s string) string {
	if len(s) != 32 || strings.Trim(s, "0123456789abcdef") != "" {
		return "want 32 lower-case hex digits"
	}
	if strings.Trim(s, "0") == "" {
		return "all zeros is not a machine-id"
	}
	return ""
}

// HostKeys are a machine's SSH host keys as the store keeps them: the
// public halves in clear, for known_hosts files, and the private halves
// sealed with the fleet's identity key, which is never in the store, so a
// dump of the database alone gives no private key away.
type HostKeys struct {
	MAC net.HardwareAddr
	// Public are the public keys in authorized_keys form ("ssh-ed25519
	// AAAA..."), one per key type.
	Public []string
	// Sealed is the private keys, encrypted; nil in listings.
	Sealed []byte
	// KeyID names the identity key that sealed them, so a server with
	// another key can say so instead of failing to decrypt.
	KeyID   string
	Created time.Time
}

// Validate checks k before it is stored.
func (k *HostKeys) Validate() error {
	if len(k.MAC) != 6 {
		return invalid("mac", "want a 6-byte Ethernet MAC, got %q", k.MAC.String())
	}
	if len(k.Public) == 0 || len(k.Sealed) == 0 || k.KeyID == "" {
		return invalid("host_keys", "want public keys, sealed private keys and the sealing key's ID")
	}
	for _, p := range k.Public {
		if strings.ContainsAny(p, "\r\n") || !strings.HasPrefix(p, "ssh-") && !strings.HasPrefix(p, "ecdsa-") {
			return invalid("host_keys", "want one authorized_keys line per public key, got %.40q", p)
		}
	}
	return nil
}

// HostKeyStore keeps machines' SSH host keys. The keys go with their
// machine: DeleteMachine deletes them.
type HostKeyStore interface {
	// HostKeys returns mac's keys. ErrNotFound when it has none.
	HostKeys(ctx context.Context, mac net.HardwareAddr) (HostKeys, error)
	// PutHostKeys stores k for k.MAC and returns what is stored. Without
	// replace, keys already stored win: servers making a machine's keys at
	// once all get the first one's. With replace (a rekey) k replaces
	// them. ErrNotFound when the machine does not exist.
	PutHostKeys(ctx context.Context, k HostKeys, replace bool) (HostKeys, error)
	// ListHostKeys returns every machine's public keys ordered by MAC,
	// without the sealed private keys.
	ListHostKeys(ctx context.Context) ([]HostKeys, error)
}
