package inventory

import (
	"context"
	"time"
)

// Scope is what an API token may do. Scopes are ordered: each one allows
// everything the ones before it allow.
type Scope string

// The scopes, weakest first.
const (
	// ScopeRead lists and shows: machines, profiles, images, leases, boots.
	ScopeRead Scope = "read"
	// ScopeOperate also sets a machine's profile and resets its overlay:
	// what a help desk needs to re-image a PC, and nothing that changes
	// what the fleet is.
	ScopeOperate Scope = "operate"
	// ScopeAdmin may do everything: machines, profiles, images, tokens and
	// the audit trail.
	ScopeAdmin Scope = "admin"
)

var scopeRank = map[Scope]int{ScopeRead: 1, ScopeOperate: 2, ScopeAdmin: 3}

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return scopeRank[s] > 0 }

// Allows reports whether a token of scope s may do what needs scope need.
// An unknown scope allows nothing.
func (s Scope) Allows(need Scope) bool {
	return s.Valid() && need.Valid() && scopeRank[s] >= scopeRank[need]
}

// Token is an API token. The store keeps only the SHA-256 of its secret:
// a leaked database or backup gives no usable token.
type Token struct {
	Name    string
	Scope   Scope
	Hash    string // lower-case hex SHA-256 of the secret, 64 characters
	Created time.Time
}

// Tokens is the API token table.
type Tokens interface {
	// ListTokens returns every token ordered by name.
	ListTokens(ctx context.Context) ([]Token, error)
	// CreateToken adds t. ErrConflict (field name) when the name is taken.
	CreateToken(ctx context.Context, t Token) (Token, error)
	// TokenByHash finds the token whose secret hashes to hash, by the
	// table's index: the API asks it on every request. ErrNotFound when
	// no token has it.
	TokenByHash(ctx context.Context, hash string) (Token, error)
	// DeleteToken revokes the token named name; ErrNotFound when none is.
	DeleteToken(ctx context.Context, name string) error
}

// Validate checks t and fills Created when zero.
func (t *Token) Validate(now time.Time) error {
	if !pnameRE.MatchString(t.Name) {
		return invalid("name", "want a token name (letters, digits, . _ -, at most 63), got %q", t.Name)
	}
	if !t.Scope.Valid() {
		return invalid("scope", "want read, operate or admin, got %q", t.Scope)
	}
	if !sha256RE.MatchString(t.Hash) {
		return invalid("hash", "want the secret's SHA-256 as 64 lower-case hex digits, got %d characters", len(t.Hash))
	}
	if t.Created.IsZero() {
		t.Created = now
	}
	return nil
}
