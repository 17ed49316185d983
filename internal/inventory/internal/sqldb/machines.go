package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const machineCols = `mac, name, profile, labels, ip, state, source, last_boot, last_address, machine_id, root_files, vars, root_channel`

func scanMachine(sc interface{ Scan(...any) error }) (inventory.Machine, error) {
	var (
		m                    inventory.Machine
		mac, labels          string
		profile, ip, lastAdr sql.NullString
		state, source        string
		files, vars          string
	)
	if err := sc.Scan(&mac, &m.Name, &profile, &labels, &ip, &state, &source, scanTime{&m.LastBoot}, &lastAdr, &m.MachineID, &files, &vars, &m.Channel); err != nil {
		return m, err
	}
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return m, fmt.Errorf("stored machine MAC %q: %w", mac, err)
	}
	m.MAC, m.Profile = hw, profile.String
	m.IP, m.LastAddress = parseIP(ip), parseIP(lastAdr)
	m.State, m.Source = inventory.State(state), inventory.Source(source)
	if err := json.Unmarshal([]byte(labels), &m.Labels); err != nil {
		return m, fmt.Errorf("stored labels of %s: %w", mac, err)
	}
	if err := scanRootFiles(files, vars, &m.RootFiles, &m.Vars); err != nil {
		return m, fmt.Errorf("machine %s: %w", mac, err)
	}
	return m, nil
}

// ListMachines implements inventory.Machines.
func (s *Store) ListMachines(ctx context.Context, f inventory.MachineFilter) ([]inventory.Machine, error) {
	q := `SELECT ` + machineCols + ` FROM machines WHERE 1=1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	if f.Profile != "" {
		q += ` AND profile = ?`
		args = append(args, f.Profile)
	}
	rows, err := s.query(ctx, s.r, q+` ORDER BY mac`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Machine{}
	for rows.Next() {
		m, err := scanMachine(rows)
		if err != nil {
			return nil, s.dbErr("read machine", err)
		}
		if f.Match(m) {
			out = append(out, m)
		}
	}
	return out, s.rowsErr(rows)
}

func (s *Store) rowsErr(rows *sql.Rows) error {
	if err := rows.Err(); err != nil {
		return s.dbErr("read", err)
	}
	return nil
}

// GetMachine implements inventory.Machines.
func (s *Store) GetMachine(ctx context.Context, mac net.HardwareAddr) (inventory.Machine, error) {
	return s.getMachine(ctx, s.r, mac)
}

func (s *Store) getMachine(ctx context.Context, q querier, mac net.HardwareAddr) (inventory.Machine, error) {
	m, err := scanMachine(q.QueryRowContext(ctx, s.d.rebind(`SELECT `+machineCols+` FROM machines WHERE mac = ?`), mac.String()))
	if errors.Is(err, sql.ErrNoRows) {
		return m, inventory.NotFound("mac", "no machine with MAC %s", mac)
	}
	if err != nil {
		return m, s.dbErr("read machine", err)
	}
	return m, nil
}

// checkMachine finds what would make writing m fail, with a message that
// names the other record. The unique constraints stay as the backstop.
func (s *Store) checkMachine(ctx context.Context, tx *sql.Tx, m inventory.Machine) error {
	if m.Profile != "" {
		var one int
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM profiles WHERE name = ?`), m.Profile).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return inventory.Invalid("profile", "no profile named %q; add it first (bootfleet profile add) or pick one from bootfleet profile list", m.Profile)
		}
		if err != nil {
			return s.dbErr("read profile", err)
		}
	}
	if m.Name != "" {
		if other, err := s.otherMachine(ctx, tx, `name = ?`, m.Name, m.MAC); err != nil {
			return err
		} else if other != "" {
			return inventory.Conflict("name", "%s is already the name of %s; pick another name", m.Name, other)
		}
	}
	if m.IP != nil {
		if other, err := s.otherMachine(ctx, tx, `ip = ?`, m.IP.String(), m.MAC); err != nil {
			return err
		} else if other != "" {
			return inventory.Conflict("ip", "%s is already reserved for %s; pick another address", m.IP, other)
		}
	}
	return nil
}

func (s *Store) otherMachine(ctx context.Context, tx *sql.Tx, cond string, v any, self net.HardwareAddr) (string, error) {
	var mac string
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT mac FROM machines WHERE `+cond+` AND mac <> ?`), v, self.String()).Scan(&mac)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", s.dbErr("read machine", err)
	}
	return mac, nil
}

func (s *Store) machineArgs(m inventory.Machine) ([]any, error) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	labels, err := jsonArg(m.Labels)
	if err != nil {
		return nil, err
	}
	files, vars, err := rootFileArgs(m.RootFiles, m.Vars)
	if err != nil {
		return nil, err
	}
	return []any{m.Name, strArg(m.Profile), labels, ipArg(m.IP), string(m.State), string(m.Source),
		s.d.timeArg(m.LastBoot), ipArg(m.LastAddress), m.MachineID, files, vars, m.Channel, m.MAC.String()}, nil
}

// CreateMachine implements inventory.Machines.
func (s *Store) CreateMachine(ctx context.Context, m inventory.Machine) (inventory.Machine, error) {
	if err := m.Validate(); err != nil {
		return m, err
	}
	if m.MachineID == "" {
		m.MachineID = inventory.NewMachineID()
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if old, err := s.getMachine(ctx, tx, m.MAC); err == nil {
			return inventory.Conflict("mac", "machine %s already exists; change it with bootfleet machine set", old)
		} else if !errors.Is(err, inventory.ErrNotFound) {
			return err
		}
		if err := s.checkMachine(ctx, tx, m); err != nil {
			return err
		}
		args, err := s.machineArgs(m)
		if err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, `INSERT INTO machines (name, profile, labels, ip, state, source, last_boot, last_address, machine_id, root_files, vars, root_channel, mac)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		return err
	})
	if err != nil {
		return m, err
	}
	return s.GetMachine(ctx, m.MAC)
}

// UpdateMachine implements inventory.Machines.
func (s *Store) UpdateMachine(ctx context.Context, m inventory.Machine) (inventory.Machine, error) {
	if err := m.Validate(); err != nil {
		return m, err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.checkMachine(ctx, tx, m); err != nil {
			return err
		}
		args, err := s.machineArgs(m)
		if err != nil {
			return err
		}
		// An empty machine_id keeps the stored one: only a new machine
		// gets a new one.
		res, err := s.exec(ctx, tx, `UPDATE machines SET name = ?, profile = ?, labels = ?, ip = ?, state = ?, source = ?,
			last_boot = ?, last_address = ?, machine_id = COALESCE(NULLIF(?, ''), machine_id),
			root_files = ?, vars = ?, root_channel = ? WHERE mac = ?`, args...)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("mac", "no machine with MAC %s", m.MAC))
	})
	if err != nil {
		return m, err
	}
	return s.GetMachine(ctx, m.MAC)
}

func mustAffect(res sql.Result, notFound error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound
	}
	return nil
}

// SetStatus implements inventory.Machines.
func (s *Store) SetStatus(ctx context.Context, mac net.HardwareAddr, st inventory.State, at time.Time, addr net.IP) error {
	if _, err := inventory.ParseState(string(st)); err != nil {
		return err
	}
	if addr != nil && addr.To4() == nil {
		return inventory.Invalid("last_address", "want an IPv4 address, got %v", addr)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE machines SET state = ?, last_boot = COALESCE(?, last_boot),
			last_address = COALESCE(?, last_address) WHERE mac = ?`,
			string(st), s.d.timeArg(at), ipArg(addr.To4()), mac.String())
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("mac", "no machine with MAC %s", mac))
	})
}

// DeleteMachine implements inventory.Machines.
func (s *Store) DeleteMachine(ctx context.Context, mac net.HardwareAddr) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		// The machine's host keys go with it: a machine added again with
		// this MAC is a new machine and gets new ones.
		if _, err := s.exec(ctx, tx, `DELETE FROM host_keys WHERE mac = ?`, mac.String()); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, `DELETE FROM machines WHERE mac = ?`, mac.String())
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("mac", "no machine with MAC %s", mac))
	})
}

// usersOf names up to three machines using profile, for error messages.
func (s *Store) usersOf(ctx context.Context, tx *sql.Tx, profile string) (n int, some string, err error) {
	rows, err := s.query(ctx, tx, `SELECT mac, name FROM machines WHERE profile = ? ORDER BY mac`, profile)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var mac, name string
		if err := rows.Scan(&mac, &name); err != nil {
			return 0, "", s.dbErr("read machine", err)
		}
		n++
		if len(names) < 3 {
			if name == "" {
				name = mac
			}
			names = append(names, name)
		}
	}
	if n > len(names) {
		names = append(names, "...")
	}
	return n, strings.Join(names, ", "), s.rowsErr(rows)
}
