package sqldb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ListLeases implements inventory.Leases.
func (s *Store) ListLeases(ctx context.Context) ([]inventory.Lease, error) {
	rows, err := s.query(ctx, s.r, `SELECT mac, ip, expiry FROM leases`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Lease{}
	for rows.Next() {
		var (
			l       inventory.Lease
			mac, ip string
		)
		if err := rows.Scan(&mac, &ip, scanTime{&l.Expiry}); err != nil {
			return nil, s.dbErr("read lease", err)
		}
		hw, err := net.ParseMAC(mac)
		l.IP = net.ParseIP(ip).To4()
		if err != nil || l.IP == nil {
			return nil, fmt.Errorf("%s: stored lease mac %q ip %q is damaged; delete that row", s.d.Name, mac, ip)
		}
		l.MAC = hw
		out = append(out, l)
	}
	// Sorted here because the column is text: "10.0.0.20" < "10.0.0.100".
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].IP, out[j].IP) < 0 })
	return out, s.rowsErr(rows)
}

// GetLease implements inventory.Leases.
func (s *Store) GetLease(ctx context.Context, mac net.HardwareAddr) (inventory.Lease, error) {
	var (
		l  inventory.Lease
		ip string
	)
	err := s.r.QueryRowContext(ctx, s.d.rebind(`SELECT ip, expiry FROM leases WHERE mac = ?`), mac.String()).Scan(&ip, scanTime{&l.Expiry})
	if errors.Is(err, sql.ErrNoRows) {
		return inventory.Lease{}, inventory.NotFound("mac", "no lease for %s", mac)
	}
	if err != nil {
		return inventory.Lease{}, s.dbErr("read lease", err)
	}
	if l.IP = net.ParseIP(ip).To4(); l.IP == nil {
		return inventory.Lease{}, fmt.Errorf("%s: stored lease mac %q ip %q is damaged; delete that row", s.d.Name, mac, ip)
	}
	l.MAC = append(net.HardwareAddr(nil), mac...)
	return l, nil
}

// PutLease implements inventory.Leases. It commits before returning; with
// SQLite in WAL mode and synchronous=FULL that means the WAL is fsynced.
func (s *Store) PutLease(ctx context.Context, l inventory.Lease) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return s.putLease(ctx, tx, l) })
}

// PutLeases implements inventory.LeaseBatcher: one transaction, so one
// commit (one WAL fsync for SQLite) makes them all durable. errs[i] is
// ls[i]'s own failure (invalid, or its address leased to another MAC), and
// that lease is not written; err means the transaction failed and none is.
func (s *Store) PutLeases(ctx context.Context, ls []inventory.Lease) (errs []error, err error) {
	errs = make([]error, len(ls))
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for i, l := range ls {
			err := s.putLease(ctx, tx, l)
			var ie *inventory.Error
			if errors.As(err, &ie) {
				errs[i] = err
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return errs, err
}

// putLease writes l in tx. The unique constraint on the address is what
// keeps one address from two MACs when servers sharing the store commit
// at once: the check before the insert sees only what was committed
// when it ran. A violation fails just this lease, rolled back to its
// savepoint, since PostgreSQL would otherwise abort the whole batch; the
// lease that won is read back and named in the *inventory.LeaseTaken.
func (s *Store) putLease(ctx context.Context, tx *sql.Tx, l inventory.Lease) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, tx, `SAVEPOINT lease`); err != nil {
		return err
	}
	err := s.putLeaseRow(ctx, tx, l)
	if err == nil {
		_, err = s.exec(ctx, tx, `RELEASE SAVEPOINT lease`)
		return err
	}
	if _, rerr := s.exec(ctx, tx, `ROLLBACK TO SAVEPOINT lease`); rerr != nil {
		return rerr
	}
	if _, rerr := s.exec(ctx, tx, `RELEASE SAVEPOINT lease`); rerr != nil {
		return rerr
	}
	if kind, col, ok := s.d.Violation(err); ok && kind == "unique" && col == "ip" {
		holder, found, herr := s.leaseOn(ctx, tx, l.IP, l.MAC)
		if herr != nil {
			return herr
		}
		if !found { // the winner is gone again; the caller may retry
			return inventory.Conflict("ip", "%s was leased by another server meanwhile; retry", l.IP)
		}
		return &inventory.LeaseTaken{Holder: holder}
	}
	return err
}

// putLeaseRow is putLease's work: take over the expired lease l names,
// refuse any other holder, then insert or replace l.MAC's row.
func (s *Store) putLeaseRow(ctx context.Context, tx *sql.Tx, l inventory.Lease) error {
	holder, found, err := s.leaseOn(ctx, tx, l.IP, l.MAC)
	switch {
	case err != nil:
		return err
	case found && l.Replaces != nil && bytes.Equal(holder.MAC, l.Replaces.MAC) && !holder.Expiry.After(l.Replaces.Expiry):
		if _, err := s.exec(ctx, tx, `DELETE FROM leases WHERE mac = ? AND ip = ?`, holder.MAC.String(), l.IP.String()); err != nil {
			return err
		}
	case found:
		return &inventory.LeaseTaken{Holder: holder}
	}
	_, err = s.exec(ctx, tx, `INSERT INTO leases (mac, ip, expiry) VALUES (?, ?, ?)
		ON CONFLICT (mac) DO UPDATE SET ip = excluded.ip, expiry = excluded.expiry`,
		l.MAC.String(), l.IP.String(), s.d.timeArg(l.Expiry))
	return err
}

// leaseOn reads the lease of a MAC other than mac on ip.
func (s *Store) leaseOn(ctx context.Context, tx *sql.Tx, ip net.IP, mac net.HardwareAddr) (inventory.Lease, bool, error) {
	var (
		l      = inventory.Lease{IP: ip}
		holder string
	)
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT mac, expiry FROM leases WHERE ip = ? AND mac <> ?`), ip.String(), mac.String()).
		Scan(&holder, scanTime{&l.Expiry})
	if errors.Is(err, sql.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, s.dbErr("read lease", err)
	}
	if l.MAC, err = net.ParseMAC(holder); err != nil {
		return l, false, fmt.Errorf("%s: stored lease of %s has mac %q; delete that row", s.d.Name, ip, holder)
	}
	return l, true, nil
}

// DeleteLease implements inventory.Leases.
func (s *Store) DeleteLease(ctx context.Context, mac net.HardwareAddr) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `DELETE FROM leases WHERE mac = ?`, mac.String())
		return err
	})
}

// AddEvent implements inventory.Events. It also trims the machine's
// timeline to the newest eventsPerMachine entries.
func (s *Store) AddEvent(ctx context.Context, e inventory.Event) error {
	if err := e.Validate(s.now()); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO events (at, mac, kind, details) VALUES (?, ?, ?, ?)`,
			s.d.timeArg(e.Time), e.MAC.String(), e.Kind, e.Details); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx, `DELETE FROM events WHERE mac = ? AND id <= (
			SELECT id FROM events WHERE mac = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
			e.MAC.String(), e.MAC.String(), s.eventsPerMachine)
		return err
	})
}

// ListEvents implements inventory.Events.
func (s *Store) ListEvents(ctx context.Context, f inventory.EventFilter) ([]inventory.Event, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, inventory.MaxEventLimit)
	q, args := `SELECT id, at, mac, kind, details FROM events`, []any{}
	if f.MAC != nil {
		q += ` WHERE mac = ?`
		args = append(args, f.MAC.String())
	}
	rows, err := s.query(ctx, s.r, q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Event{}
	for rows.Next() {
		var (
			e   inventory.Event
			mac string
		)
		if err := rows.Scan(&e.ID, scanTime{&e.Time}, &mac, &e.Kind, &e.Details); err != nil {
			return nil, s.dbErr("read event", err)
		}
		if e.MAC, err = net.ParseMAC(mac); err != nil {
			return nil, fmt.Errorf("%s: stored event %d has MAC %q: %w", s.d.Name, e.ID, mac, err)
		}
		out = append(out, e)
	}
	return out, s.rowsErr(rows)
}
