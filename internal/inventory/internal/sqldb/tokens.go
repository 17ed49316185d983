package sqldb

import (
	"context"
	"database/sql"
	"errors"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const tokenCols = `name, scope, hash, created`

func scanToken(sc interface{ Scan(...any) error }) (inventory.Token, error) {
	var t inventory.Token
	err := sc.Scan(&t.Name, &t.Scope, &t.Hash, scanTime{&t.Created})
	return t, err
}

// ListTokens implements inventory.Tokens.
func (s *Store) ListTokens(ctx context.Context) ([]inventory.Token, error) {
	rows, err := s.query(ctx, s.r, `SELECT `+tokenCols+` FROM api_tokens ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, s.dbErr("read token", err)
		}
		out = append(out, t)
	}
	return out, s.rowsErr(rows)
}

// CreateToken implements inventory.Tokens.
func (s *Store) CreateToken(ctx context.Context, t inventory.Token) (inventory.Token, error) {
	if err := t.Validate(s.now()); err != nil {
		return t, err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		// Checked first so the error names the field on both engines.
		var n int
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*) FROM api_tokens WHERE name = ?`), t.Name).Scan(&n); err != nil {
			return s.dbErr("read token", err)
		}
		if n > 0 {
			return inventory.Conflict("name", "a token named %s exists; revoke it first or pick another name", t.Name)
		}
		_, err := s.exec(ctx, tx, `INSERT INTO api_tokens (`+tokenCols+`) VALUES (?, ?, ?, ?)`,
			t.Name, string(t.Scope), t.Hash, s.d.timeArg(t.Created))
		return err
	})
	if err != nil {
		return t, err
	}
	return s.tokenWhere(ctx, "name", t.Name)
}

// TokenByHash implements inventory.Tokens.
func (s *Store) TokenByHash(ctx context.Context, hash string) (inventory.Token, error) {
	return s.tokenWhere(ctx, "hash", hash)
}

// tokenWhere reads the token whose col (name or hash, both unique) is v.
func (s *Store) tokenWhere(ctx context.Context, col, v string) (inventory.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx, s.d.rebind(`SELECT `+tokenCols+` FROM api_tokens WHERE `+col+` = ?`), v))
	if errors.Is(err, sql.ErrNoRows) {
		if col == "hash" {
			return t, inventory.NotFound("token", "no such token; it was never made or was revoked")
		}
		return t, inventory.NotFound("name", "no token named %q; see bootfleet token list", v)
	}
	if err != nil {
		return t, s.dbErr("read token", err)
	}
	return t, nil
}

// DeleteToken implements inventory.Tokens.
func (s *Store) DeleteToken(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `DELETE FROM api_tokens WHERE name = ?`, name)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("name", "no token named %q; see bootfleet token list", name))
	})
}
