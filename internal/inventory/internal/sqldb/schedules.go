package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ListSchedules implements inventory.PowerSchedules.
func (s *Store) ListSchedules(ctx context.Context) ([]inventory.PowerSchedule, error) {
	rows, err := s.query(ctx, s.r, `SELECT name, at, action, profile, machines, all_machines, wave FROM power_schedules ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.PowerSchedule{}
	for rows.Next() {
		var (
			p        inventory.PowerSchedule
			machines string
		)
		if err := rows.Scan(&p.Name, &p.At, &p.Action, &p.Profile, &machines, &p.All, &p.Wave); err != nil {
			return nil, s.dbErr("read schedule", err)
		}
		if err := json.Unmarshal([]byte(machines), &p.Machines); err != nil {
			return nil, fmt.Errorf("stored machines of schedule %s: %w", p.Name, err)
		}
		out = append(out, p)
	}
	return out, s.rowsErr(rows)
}

// PutSchedule implements inventory.PowerSchedules.
func (s *Store) PutSchedule(ctx context.Context, p inventory.PowerSchedule) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Machines == nil {
		p.Machines = []string{}
	}
	machines, err := jsonArg(p.Machines)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO power_schedules (name, at, action, profile, machines, all_machines, wave)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET at = excluded.at, action = excluded.action,
			profile = excluded.profile, machines = excluded.machines, all_machines = excluded.all_machines, wave = excluded.wave`,
			p.Name, p.At, p.Action, p.Profile, machines, p.All, p.Wave)
		return err
	})
}

// DeleteSchedule implements inventory.PowerSchedules.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `DELETE FROM power_schedules WHERE name = ?`, name)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("name", "no schedule named %q added through the API; see bootfleet power schedules", name))
	})
}
