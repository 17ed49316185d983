package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// FileTokenName names the api-token file's token wherever tokens are
// named. It is an admin token, and no stored token may take the name.
const FileTokenName = "api-token"

// caller is who sent a request: the token's name and scope.
type caller struct {
	name  string
	scope inventory.Scope
}

type callerKey struct{}

// callerOf returns the request's authenticated caller; open routes have
// the zero caller.
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

func withCaller(r *http.Request, c caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// errUnauthorized is a 401: no token, or one that is not known.
type errUnauthorized struct{ msg string }

func (e *errUnauthorized) Error() string { return e.msg }

// errForbidden is a 403: a known token whose scope is too weak.
type errForbidden struct {
	caller caller
	need   inventory.Scope
	what   string // what was asked, e.g. "PATCH /machines/{mac}"
}

func (e *errForbidden) Error() string {
	return fmt.Sprintf("token %s has scope %s, but %s needs scope %s; use a token with scope %s (bootfleet token create NAME --scope %s)",
		e.caller.name, e.caller.scope, e.what, e.need, e.need, e.need)
}

// require returns an errForbidden unless r's caller has scope need.
func require(r *http.Request, need inventory.Scope, what string) error {
	c := callerOf(r)
	if c.scope.Allows(need) {
		return nil
	}
	return &errForbidden{caller: c, need: need, what: what}
}

// authenticate finds who sent r. The file token is compared in constant
// time. Stored tokens are found by their SHA-256: timing can then only
// tell an attacker about the hash's prefix, which gives no way to a secret.
func (s *server) authenticate(r *http.Request) (caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return caller{}, &errUnauthorized{"missing Authorization: Bearer TOKEN header; the token is in the server's data directory (api-token)"}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return caller{}, &errUnauthorized{"want Authorization: Bearer TOKEN"}
	}
	tok = strings.TrimSpace(tok)
	if subtle.ConstantTimeCompare([]byte(tok), s.token) == 1 {
		return caller{name: FileTokenName, scope: inventory.ScopeAdmin}, nil
	}
	t, err := s.cfg.Store.TokenByHash(r.Context(), HashToken(tok))
	if errors.Is(err, inventory.ErrNotFound) {
		return caller{}, &errUnauthorized{"unknown or revoked token; use the api-token file in the server's data directory or one from bootfleet token create"}
	}
	if err != nil {
		return caller{}, fmt.Errorf("look up token: %w", err)
	}
	return caller{name: t.Name, scope: t.Scope}, nil
}

// HashToken is how a token's secret is stored: the hex SHA-256 of the
// secret. Not bcrypt or another slow hash: a slow hash protects guessable
// human passwords, while these secrets are 256 random bits no attacker can
// enumerate, and an unsalted fast hash lets every request find its token
// by an index lookup instead of comparing against every stored token.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// newSecret returns a new token secret: 32 random bytes in hex, the form
// of the api-token file.
func newSecret() string {
	buf := make([]byte, 32)
	rand.Read(buf) // never fails (crypto/rand panics rather than return short)
	return hex.EncodeToString(buf)
}
