package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// SetNextBoot implements inventory.NextBoots.
func (s *Store) SetNextBoot(ctx context.Context, mac net.HardwareAddr, target string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.getMachine(ctx, tx, mac); err != nil {
			return err
		}
		if target == "" {
			_, err := s.exec(ctx, tx, `DELETE FROM machine_next_boot WHERE mac = ?`, mac.String())
			return err
		}
		if target != inventory.NextBootLocal {
			var one int
			err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM profiles WHERE name = ?`), target).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return inventory.Invalid("target", "no profile named %q; want a profile (bootfleet profile list), local or maintenance", target)
			}
			if err != nil {
				return s.dbErr("read profile", err)
			}
		}
		_, err := s.exec(ctx, tx, `INSERT INTO machine_next_boot (mac, target, set_at) VALUES (?, ?, ?)
			ON CONFLICT (mac) DO UPDATE SET target = excluded.target, set_at = excluded.set_at`,
			mac.String(), target, s.d.timeArg(s.now()))
		return err
	})
}

// GetNextBoot implements inventory.NextBoots.
func (s *Store) GetNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error) {
	var target string
	err := s.r.QueryRowContext(ctx, s.d.rebind(`SELECT target FROM machine_next_boot WHERE mac = ?`), mac.String()).Scan(&target)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.dbErr("read next boot", err)
	}
	return target, nil
}

// TakeNextBoot implements inventory.NextBoots. DELETE ... RETURNING is one
// statement, so two servers cannot both take the override.
func (s *Store) TakeNextBoot(ctx context.Context, mac net.HardwareAddr) (string, error) {
	var target string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.d.rebind(`DELETE FROM machine_next_boot WHERE mac = ? RETURNING target`), mac.String()).Scan(&target)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return s.dbErr("take next boot", err)
		}
		return nil
	})
	return target, err
}

// scheduleKeep is how long claims of schedule runs are kept.
const scheduleKeep = 30 * 24 * time.Hour

// ClaimScheduleRun implements inventory.ScheduleRuns: the primary key
// (name, at) lets one insert in.
func (s *Store) ClaimScheduleRun(ctx context.Context, name string, at time.Time, server string) (bool, error) {
	if name == "" || at.IsZero() {
		return false, inventory.Invalid("name", "want a schedule name and the time its firing is due")
	}
	var won bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `INSERT INTO schedule_runs (name, at, server) VALUES (?, ?, ?) ON CONFLICT (name, at) DO NOTHING`,
			name, s.d.timeArg(at), server)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		won = n == 1
		_, err = s.exec(ctx, tx, `DELETE FROM schedule_runs WHERE at < ?`, s.d.timeArg(at.Add(-scheduleKeep)))
		return err
	})
	return won, err
}
