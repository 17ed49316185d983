package api

import (
	"net/http"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Token is an API token on the wire. Secret is set only in the answer to
// POST /tokens: the server keeps only its hash and cannot show it again.
type Token struct {
	Name    string    `json:"name"`
	Scope   string    `json:"scope"`
	Created time.Time `json:"created,omitzero"`
	Secret  string    `json:"token,omitempty"`
}

// TokenList is the answer of GET /tokens. The api-token file's token is
// listed too, so an admin sees every token that works.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

func tokenOut(t inventory.Token) Token {
	return Token{Name: t.Name, Scope: string(t.Scope), Created: t.Created.UTC()}
}

func (s *server) listTokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.cfg.Store.ListTokens(r.Context())
	if err != nil {
		return err
	}
	out := TokenList{Tokens: []Token{{Name: FileTokenName, Scope: string(inventory.ScopeAdmin)}}}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, tokenOut(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) createToken(w http.ResponseWriter, r *http.Request) error {
	var in Token
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.Secret != "" {
		return inventory.Invalid("token", "the server makes the secret; send only name and scope")
	}
	if in.Name == FileTokenName {
		return inventory.Conflict("name", "%s is the token in the server's data directory; pick another name", FileTokenName)
	}
	secret := newSecret()
	t, err := s.cfg.Store.CreateToken(r.Context(), inventory.Token{Name: in.Name, Scope: inventory.Scope(in.Scope),
		Hash: HashToken(secret), Created: s.cfg.Now()})
	if err != nil {
		return err
	}
	s.log.Info("api token created", "name", t.Name, "scope", t.Scope, "by", callerOf(r).name)
	out := tokenOut(t)
	out.Secret = secret
	w.Header().Set("Location", Prefix+"/tokens/"+t.Name)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *server) deleteToken(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if name == FileTokenName {
		return inventory.Conflict("name", "%s is the token file in the server's data directory; to replace it, delete the file and restart bootfleet", FileTokenName)
	}
	if err := s.cfg.Store.DeleteToken(r.Context(), name); err != nil {
		return err
	}
	s.log.Info("api token revoked", "name", name, "by", callerOf(r).name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
