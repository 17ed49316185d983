package identitysvc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// KeyCheckName is the fleet secret that holds the identity key's check
// value: an HMAC of a fixed label under the key, which names the key
// without giving it away. The first server to offer one sets it for the
// fleet; a server whose key does not give the same value has another key.
const KeyCheckName = "identity-key-check"

const keyCheckLabel = "bootfleet identity key check v1"

// KeyStore is what OpenKey needs of the inventory: inventory.Secrets, an
// atomic insert-if-absent that returns the value stored, and the host
// keys already sealed.
type KeyStore interface {
	inventory.Secrets
	ListHostKeys(ctx context.Context) ([]inventory.HostKeys, error)
}

// check is s's check value.
func (s *Sealer) check() []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(keyCheckLabel))
	return m.Sum(nil)
}

// OpenKey loads the fleet's identity key from the file at path and makes
// sure it is the fleet's: the first key any server uses leaves its check
// value in the store, and a server whose key gives another value gets an
// error wrapping ErrNoKey saying which file to copy. A server without the
// file makes one only while the fleet has no check value and no sealed
// host keys; two servers doing that at once race on the store's atomic
// insert, and the one that loses deletes the file it made and refuses.
func OpenKey(ctx context.Context, store KeyStore, path string) (*Sealer, error) {
	made := false
	sealer, err := LoadKey(path, false)
	if errors.Is(err, ErrNoKey) {
		if err := fleetHasKeys(ctx, store, path); err != nil {
			return nil, err
		}
		sealer, err = LoadKey(path, true)
		made = err == nil
	}
	if err != nil {
		return nil, err
	}
	want := sealer.check()
	got, err := store.Secret(ctx, KeyCheckName, want)
	if err != nil {
		if made {
			os.Remove(path)
		}
		return nil, fmt.Errorf("identity key: store its check value: %w", err)
	}
	if hmac.Equal(got, want) {
		return sealer, nil
	}
	if made {
		// Another server made the fleet's key first: this one was never used.
		os.Remove(path)
		return nil, fmt.Errorf("%w: %s did not exist and the fleet already has an identity key, made by another server; copy that server's identity.key_file to %s (mode 0600) and restart", ErrNoKey, path, path)
	}
	return nil, fmt.Errorf("%w: %s is not the fleet's identity key (its check value differs from the one the fleet's first key stored); every server of a fleet needs the same file: copy it from a server that serves identities to %s (mode 0600) and restart", ErrNoKey, path, path)
}

// fleetHasKeys refuses to make a new key when machines' host keys are
// already sealed, by a server from before check values or one whose key
// file was lost: a new key would not open them.
func fleetHasKeys(ctx context.Context, store KeyStore, path string) error {
	keys, err := store.ListHostKeys(ctx)
	if err != nil {
		return fmt.Errorf("identity key: list sealed host keys: %w", err)
	}
	if len(keys) > 0 {
		return fmt.Errorf("%w: %s does not exist, and %d machines' host keys are sealed with identity key %s; copy the key file from a server of the fleet to %s (mode 0600) and restart", ErrNoKey, path, len(keys), keys[0].KeyID, path)
	}
	return nil
}
