package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const bootCols = `id, mac, started, state, record`

// PutBoots implements inventory.BootRecords.
func (s *Store) PutBoots(ctx context.Context, bs []inventory.BootRecord) error {
	for i := range bs {
		if err := bs[i].Validate(); err != nil {
			return err
		}
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, b := range bs {
			if _, err := s.exec(ctx, tx, `INSERT INTO boots (`+bootCols+`) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (id) DO UPDATE SET mac = excluded.mac, started = excluded.started,
					state = excluded.state, record = excluded.record`,
				b.ID, b.MAC.String(), s.d.timeArg(b.Start), b.State, string(b.Record)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListBoots implements inventory.BootRecords.
func (s *Store) ListBoots(ctx context.Context, f inventory.BootFilter) ([]inventory.BootRecord, error) {
	q, args := `SELECT `+bootCols+` FROM boots WHERE 1 = 1`, []any{}
	if f.MAC != nil {
		q += ` AND mac = ?`
		args = append(args, f.MAC.String())
	}
	if !f.Since.IsZero() {
		q += ` AND started >= ?`
		args = append(args, s.d.timeArg(f.Since))
	}
	if !f.Until.IsZero() {
		q += ` AND started < ?`
		args = append(args, s.d.timeArg(f.Until))
	}
	q += ` ORDER BY started DESC, id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.query(ctx, s.r, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.BootRecord{}
	for rows.Next() {
		b, err := s.scanBoot(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, s.rowsErr(rows)
}

// GetBoot implements inventory.BootRecords.
func (s *Store) GetBoot(ctx context.Context, id string) (inventory.BootRecord, error) {
	b, err := s.scanBoot(s.r.QueryRowContext(ctx, s.d.rebind(`SELECT `+bootCols+` FROM boots WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return inventory.BootRecord{}, inventory.NotFound("id", "no stored boot %q", id)
	}
	return b, err
}

func (s *Store) scanBoot(row interface{ Scan(...any) error }) (inventory.BootRecord, error) {
	var (
		b      inventory.BootRecord
		mac    string
		record string
	)
	if err := row.Scan(&b.ID, &mac, scanTime{&b.Start}, &b.State, &record); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return b, err
		}
		return b, s.dbErr("read boot", err)
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return b, fmt.Errorf("%s: stored boot %s has MAC %q, want a MAC; delete that row: %w", s.d.Name, b.ID, mac, err)
	}
	b.MAC, b.Record = hw, []byte(record)
	return b, nil
}

// PruneBoots implements inventory.BootRecords. Boots beyond the keep
// newest are those ordered after the keep-th by (started, id)
// descending, the order ListBoots returns.
func (s *Store) PruneBoots(ctx context.Context, before time.Time, keep, max int) (int, error) {
	if keep < 0 || max < 1 {
		return 0, inventory.Invalid("keep", "want keep >= 0 and max >= 1, got keep %d, max %d", keep, max)
	}
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cond, args := `started < ?`, []any{s.d.timeArg(before)}
		if before.IsZero() {
			cond, args = `1 = 0`, nil
		}
		var (
			edge   time.Time
			edgeID string
		)
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT started, id FROM boots ORDER BY started DESC, id DESC LIMIT 1 OFFSET ?`), keep).
			Scan(scanTime{&edge}, &edgeID)
		switch {
		case err == nil:
			cond += ` OR started < ? OR (started = ? AND id <= ?)`
			args = append(args, s.d.timeArg(edge), s.d.timeArg(edge), edgeID)
		case !errors.Is(err, sql.ErrNoRows):
			return s.dbErr("find the oldest boot to keep", err)
		}
		res, err := s.exec(ctx, tx, `DELETE FROM boots WHERE id IN (
			SELECT id FROM boots WHERE `+cond+` ORDER BY started, id LIMIT ?)`, append(args, max)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
