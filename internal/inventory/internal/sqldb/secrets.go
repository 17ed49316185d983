package sqldb

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Secret implements inventory.Secrets. The insert that loses a race does
// nothing (ON CONFLICT DO NOTHING), so both servers read the winner's value.
func (s *Store) Secret(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	if err := inventory.ValidateSecret(name, fresh); err != nil {
		return nil, err
	}
	var stored string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO fleet_secrets (name, value, created) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
			name, hex.EncodeToString(fresh), s.d.timeArg(s.now())); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT value FROM fleet_secrets WHERE name = ?`), name).Scan(&stored); err != nil {
			return s.dbErr("read secret", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(stored)
	if err != nil {
		return nil, fmt.Errorf("inventory: secret %s in the store is not hex (edited by hand?): %w", name, err)
	}
	return b, nil
}
