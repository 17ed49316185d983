package identitysvc

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/internal/identity"
)

// Sealer encrypts machines' private keys with the fleet's identity key
// (AES-256-GCM), bound to the machine's MAC, so a sealed blob moved onto
// another machine's row does not open.
type Sealer struct {
	aead cipher.AEAD
	id   string
	key  []byte // for the check value only (OpenKey)
}

// ErrNoKey is identity.ErrNoKey: this server cannot make or hand out
// SSH host keys.
var ErrNoKey = identity.ErrNoKey

// LoadKey reads the identity key file at path: 64 hex digits (256 bits).
// When the file does not exist and create is true it is made, mode 0600;
// when create is false, the error wraps ErrNoKey and says what to copy.
// A server opens its key with OpenKey, which decides whether it may make
// one and checks it against the fleet's.
func LoadKey(path string, create bool) (*Sealer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		key := make([]byte, 32)
		rand.Read(key) // never fails
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("identity key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("identity key: create %s: %w", path, err)
		}
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if err2 := f.Sync(); err == nil {
			err = err2
		}
		if err2 := f.Close(); err == nil {
			err = err2
		}
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("identity key: write %s: %w", path, err)
		}
		return newSealer(key)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist; copy the file from a server of the fleet (same path, mode 0600)", ErrNoKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("identity key %s: want 64 hex digits (a 256-bit key) and a newline; restore the file from another server of the fleet", path)
	}
	return newSealer(key)
}

func newSealer(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("bootfleet identity key id\x00"), key...))
	return &Sealer{aead: aead, id: hex.EncodeToString(sum[:8]), key: key}, nil
}

// ID names the key without giving it away, stored beside what it seals.
func (s *Sealer) ID() string { return s.id }

func additional(mac net.HardwareAddr) []byte {
	return []byte("bootfleet host keys\x00" + mac.String())
}

// Seal encrypts plain for mac: a random nonce, then the ciphertext.
func (s *Sealer) Seal(mac net.HardwareAddr, plain []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, additional(mac))
}

// Open decrypts what Seal made for mac.
func (s *Sealer) Open(mac net.HardwareAddr, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, fmt.Errorf("identity: sealed keys of %s are %d bytes, too short to be sealed", mac, len(sealed))
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], additional(mac))
	if err != nil {
		return nil, fmt.Errorf("identity: sealed keys of %s do not open with identity key %s (altered, or moved from another machine): %w", mac, s.id, err)
	}
	return plain, nil
}
