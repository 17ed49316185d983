package rootdisk

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Export names are m-<mac>-<secret>: the MAC in hyphen form (17
// characters) and the secret in lower-case hex.
const (
	exportPrefix = "m-"
	macLen       = 17
	// SecretLen is the length of the secrets Issue draws: 128 random bits.
	SecretLen = 32
	// MinSecretLen and MaxSecretLen bound the secrets ParseExportName
	// accepts (64 to 256 bits).
	MinSecretLen = 16
	MaxSecretLen = 64
)

// ErrBadName means an export name is not m-<mac>-<secret>.
var ErrBadName = errors.New("rootdisk: malformed export name")

// ExportName is the export a machine's script names.
func ExportName(mac net.HardwareAddr, secret string) string {
	return exportPrefix + macPath(mac) + "-" + secret
}

// macPath is the hyphen form of a MAC, used in export and directory names.
func macPath(mac net.HardwareAddr) string {
	return strings.ReplaceAll(mac.String(), ":", "-")
}

// ParseExportName splits an export name into the MAC and the secret.
func ParseExportName(name string) (net.HardwareAddr, string, error) {
	rest, ok := strings.CutPrefix(name, exportPrefix)
	if !ok || len(rest) < macLen+1+MinSecretLen || rest[macLen] != '-' {
		return nil, "", fmt.Errorf("%w: want m-52-54-00-12-34-56-SECRET, got %.80q", ErrBadName, name)
	}
	mac, err := net.ParseMAC(rest[:macLen])
	if err != nil || len(mac) != 6 || strings.Contains(rest[:macLen], ":") {
		return nil, "", fmt.Errorf("%w: want a MAC like 52-54-00-12-34-56 after m-, got %q", ErrBadName, rest[:macLen])
	}
	secret := rest[macLen+1:]
	if len(secret) > MaxSecretLen || !isLowerHex(secret) {
		return nil, "", fmt.Errorf("%w: want a secret of %d to %d lower-case hex digits", ErrBadName, MinSecretLen, MaxSecretLen)
	}
	return mac, secret, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newSecret() string {
	b := make([]byte, SecretLen/2)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return hex.EncodeToString(b)
}

// LogLabel is how an export name appears in logs and boot records: the
// MAC and the first characters of the secret, never the whole secret,
// which opens the machine's disk until its next boot.
func LogLabel(name string) string {
	if mac, sha, _, err := ParseBaseExportName(name); err == nil {
		return basePrefix + macPath(mac) + "-" + sha[:12] + "…"
	}
	mac, secret, err := ParseExportName(name)
	if err != nil {
		return fmt.Sprintf("(not a machine export, %d bytes)", len(name))
	}
	return exportPrefix + macPath(mac) + "-" + secret[:4] + "…"
}
