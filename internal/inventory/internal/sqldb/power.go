package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const powerCols = `mac, driver, host, username, password, cipher_suite, insecure, broadcast, secureon, source`

func scanPower(sc interface{ Scan(...any) error }) (inventory.PowerSettings, error) {
	var (
		p                  inventory.PowerSettings
		mac, bcast, source string
	)
	if err := sc.Scan(&mac, &p.Driver, &p.Host, &p.User, &p.Password, &p.CipherSuite, &p.Insecure, &bcast, &p.SecureOn, &source); err != nil {
		return p, err
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return p, fmt.Errorf("stored power settings MAC %q: %w", mac, err)
	}
	p.MAC, p.Source = hw, inventory.Source(source)
	if bcast != "" {
		p.Broadcast = net.ParseIP(bcast).To4()
	}
	return p, nil
}

// GetPower implements inventory.Power.
func (s *Store) GetPower(ctx context.Context, mac net.HardwareAddr) (inventory.PowerSettings, error) {
	p, err := scanPower(s.r.QueryRowContext(ctx, s.d.rebind(`SELECT `+powerCols+` FROM machine_power WHERE mac = ?`), mac.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return p, inventory.NotFound("mac", "machine %s has no power settings", mac)
	}
	if err != nil {
		return p, s.dbErr("read power settings", err)
	}
	return p, nil
}

// ListPower implements inventory.Power.
func (s *Store) ListPower(ctx context.Context) ([]inventory.PowerSettings, error) {
	rows, err := s.query(ctx, s.r, `SELECT `+powerCols+` FROM machine_power ORDER BY mac`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.PowerSettings{}
	for rows.Next() {
		p, err := scanPower(rows)
		if err != nil {
			return nil, s.dbErr("read power settings", err)
		}
		out = append(out, p)
	}
	return out, s.rowsErr(rows)
}

// PutPower implements inventory.Power.
func (s *Store) PutPower(ctx context.Context, p inventory.PowerSettings) error {
	if err := p.Validate(); err != nil {
		return err
	}
	bcast := ""
	if p.Broadcast != nil {
		bcast = p.Broadcast.String()
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.getMachine(ctx, tx, p.MAC); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx, `INSERT INTO machine_power (`+powerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (mac) DO UPDATE SET driver = excluded.driver, host = excluded.host, username = excluded.username,
			password = excluded.password, cipher_suite = excluded.cipher_suite, insecure = excluded.insecure,
			broadcast = excluded.broadcast, secureon = excluded.secureon, source = excluded.source`,
			p.MAC.String(), p.Driver, p.Host, p.User, p.Password, p.CipherSuite, p.Insecure, bcast, p.SecureOn, string(p.Source))
		return err
	})
}

// DeletePower implements inventory.Power.
func (s *Store) DeletePower(ctx context.Context, mac net.HardwareAddr) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `DELETE FROM machine_power WHERE mac = ?`, mac.String())
		return err
	})
}
