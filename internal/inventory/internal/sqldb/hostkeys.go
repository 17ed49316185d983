package sqldb

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

func (s *Store) scanHostKeys(sc interface{ Scan(...any) error }, withSealed bool) (inventory.HostKeys, error) {
	var (
		k                   inventory.HostKeys
		mac, public, sealed string
	)
	if err := sc.Scan(&mac, &public, &sealed, &k.KeyID, scanTime{&k.Created}); err != nil {
		return k, err
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return k, fmt.Errorf("stored host keys MAC %q: %w", mac, err)
	}
	k.MAC = hw
	if err := json.Unmarshal([]byte(public), &k.Public); err != nil {
		return k, fmt.Errorf("stored public host keys of %s: %w", mac, err)
	}
	if withSealed {
		if k.Sealed, err = base64.StdEncoding.DecodeString(sealed); err != nil {
			return k, fmt.Errorf("stored sealed host keys of %s are not base64 (edited by hand?): %w", mac, err)
		}
	}
	return k, nil
}

const hostKeyCols = `mac, public, sealed, key_id, created`

// HostKeys implements inventory.HostKeyStore.
func (s *Store) HostKeys(ctx context.Context, mac net.HardwareAddr) (inventory.HostKeys, error) {
	return s.hostKeys(ctx, s.r, mac)
}

func (s *Store) hostKeys(ctx context.Context, q querier, mac net.HardwareAddr) (inventory.HostKeys, error) {
	k, err := s.scanHostKeys(q.QueryRowContext(ctx, s.d.rebind(`SELECT `+hostKeyCols+` FROM host_keys WHERE mac = ?`), mac.String()), true)
	if errors.Is(err, sql.ErrNoRows) {
		return k, inventory.NotFound("mac", "machine %s has no SSH host keys yet", mac)
	}
	if err != nil {
		return k, s.dbErr("read host keys", err)
	}
	return k, nil
}

// PutHostKeys implements inventory.HostKeyStore. Without replace, the
// insert that loses a race does nothing, so every server reads the
// winner's keys.
func (s *Store) PutHostKeys(ctx context.Context, k inventory.HostKeys, replace bool) (inventory.HostKeys, error) {
	if err := k.Validate(); err != nil {
		return k, err
	}
	public, err := jsonArg(k.Public)
	if err != nil {
		return k, err
	}
	if k.Created.IsZero() {
		k.Created = s.now()
	}
	var out inventory.HostKeys
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.getMachine(ctx, tx, k.MAC); err != nil {
			return err
		}
		q := `INSERT INTO host_keys (mac, public, sealed, key_id, created) VALUES (?, ?, ?, ?, ?) ON CONFLICT (mac) DO NOTHING`
		if replace {
			q = `INSERT INTO host_keys (mac, public, sealed, key_id, created) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (mac) DO UPDATE SET public = excluded.public, sealed = excluded.sealed,
				key_id = excluded.key_id, created = excluded.created`
		}
		if _, err := s.exec(ctx, tx, q, k.MAC.String(), public, base64.StdEncoding.EncodeToString(k.Sealed), k.KeyID,
			s.d.timeArg(k.Created)); err != nil {
			return err
		}
		out, err = s.hostKeys(ctx, tx, k.MAC)
		return err
	})
	return out, err
}

// ListHostKeys implements inventory.HostKeyStore.
func (s *Store) ListHostKeys(ctx context.Context) ([]inventory.HostKeys, error) {
	rows, err := s.query(ctx, s.r, `SELECT `+hostKeyCols+` FROM host_keys ORDER BY mac`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.HostKeys{}
	for rows.Next() {
		k, err := s.scanHostKeys(rows, false)
		if err != nil {
			return nil, s.dbErr("read host keys", err)
		}
		out = append(out, k)
	}
	return out, s.rowsErr(rows)
}
