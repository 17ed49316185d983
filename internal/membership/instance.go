package membership

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// InstanceFile is the file in the data directory that keeps the server's
// Instance across restarts.
const InstanceFile = "server-instance"

// LoadInstance returns the instance id kept in dir, making one on the
// first start. A server that restarts with its data directory then takes
// its own row back at once, even one still live after a crash, while a
// server elsewhere (another data directory) under the same name does not.
func LoadInstance(dir string) (string, error) {
	path := filepath.Join(dir, InstanceFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("server instance: %w", err)
	}
	id := newInstance()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("server instance: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("server instance: %w", err)
	}
	return id, nil
}

// newInstance is a random id of 128 bits.
func newInstance() string { return strings.ToLower(rand.Text()) }
