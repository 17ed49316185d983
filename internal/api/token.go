package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the token's file name in the data directory.
const TokenFile = "api-token"

// LoadOrCreateToken returns the API token kept in dir/api-token, creating
// the file on first start with 32 random bytes in hex, mode 0600. A token
// file readable by group or others is refused: anyone who can read it can
// change the fleet.
func LoadOrCreateToken(dir string) (string, error) {
	path := filepath.Join(dir, TokenFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		buf := make([]byte, 32)
		rand.Read(buf) // never fails (crypto/rand panics rather than return short)
		tok := hex.EncodeToString(buf)
		_, werr := f.WriteString(tok + "\n")
		serr := f.Sync()
		if err := errors.Join(werr, serr, f.Close()); err != nil {
			os.Remove(path)
			return "", fmt.Errorf("write API token %s: %w", path, err)
		}
		return tok, nil
	case !errors.Is(err, os.ErrExist):
		return "", fmt.Errorf("create API token %s: %w (is the data directory writable?)", path, err)
	}
	return ReadToken(path)
}

// ReadToken reads an existing token file, as the CLI does.
func ReadToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("API token %s has mode %04o, readable by others; run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("API token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("API token %s is empty or too short (want at least 16 characters); delete it and restart bootfleet serve to make a new one", path)
	}
	return tok, nil
}
