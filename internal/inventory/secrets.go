package inventory

import (
	"context"
	"regexp"
)

// Secrets holds keys every server of a fleet must agree on, such as the
// one that signs the names of read-only base exports (package rootdisk).
// They live in the shared store because it is the fleet's only shared
// state: a server that joins later reads the same key, with nothing to
// copy between hosts.
type Secrets interface {
	// Secret returns the secret called name. When the store has none, it
	// stores fresh first and returns it; when several servers ask at once,
	// every one gets the value the first insert stored.
	Secret(ctx context.Context, name string, fresh []byte) ([]byte, error)
}

var secretNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ValidateSecret checks a secret's name and the fresh value offered for it.
func ValidateSecret(name string, fresh []byte) error {
	if !secretNameRE.MatchString(name) {
		return invalid("name", "want a secret name (lower-case letters, digits and -, at most 63), got %q", name)
	}
	if len(fresh) < 16 || len(fresh) > 1024 {
		return invalid("secret", "want 16 to 1024 random bytes, got %d", len(fresh))
	}
	return nil
}
