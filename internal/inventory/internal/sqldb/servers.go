package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const serverCols = `name, addrs, version, started, heartbeat, stopped, tftp_transfers, nbd_sessions, bytes_per_sec, instance`

// RegisterServer implements inventory.Servers. The row is read, judged
// and written only if it is still the row read (by its start time), so
// of two servers registering one name at once, one is refused.
func (s *Store) RegisterServer(ctx context.Context, si inventory.ServerInfo) error {
	if err := si.Validate(); err != nil {
		return err
	}
	addrs, err := jsonArg(si.Addrs)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		held, err := s.queryServers(ctx, tx, `SELECT `+serverCols+` FROM servers WHERE name = ?`, si.Name)
		if err != nil {
			return err
		}
		args := []any{addrs, si.Version, s.d.timeArg(si.Started), s.d.timeArg(si.Heartbeat),
			si.Load.TFTPTransfers, si.Load.NBDSessions, si.Load.BytesPerSec, si.Instance, si.Name}
		var res sql.Result
		if len(held) == 0 {
			res, err = s.exec(ctx, tx, `INSERT INTO servers (addrs, version, started, heartbeat, stopped,
				tftp_transfers, nbd_sessions, bytes_per_sec, instance, name) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?)
				ON CONFLICT (name) DO NOTHING`, args...)
		} else {
			if !si.MayReplace(held[0]) {
				return si.NameTaken(held[0])
			}
			res, err = s.exec(ctx, tx, `UPDATE servers SET addrs = ?, version = ?, started = ?, heartbeat = ?, stopped = NULL,
				tftp_transfers = ?, nbd_sessions = ?, bytes_per_sec = ?, instance = ?
				WHERE name = ? AND started = ?`, append(args, s.d.timeArg(held[0].Started))...)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		return inventory.Conflict("name", "server %q registered at the same moment as another server of that name: two servers share the name; set server.name to a name of this server's own", si.Name)
	})
}

// HeartbeatServer implements inventory.Servers. One UPDATE of one row by
// its key, so a heartbeat never waits long behind DHCP's lease commits.
func (s *Store) HeartbeatServer(ctx context.Context, name string, started, at time.Time, load inventory.ServerLoad) error {
	return s.updateServer(ctx, name, started, `heartbeat = ?, tftp_transfers = ?, nbd_sessions = ?, bytes_per_sec = ?`,
		s.d.timeArg(at), load.TFTPTransfers, load.NBDSessions, load.BytesPerSec)
}

// StopServer implements inventory.Servers.
func (s *Store) StopServer(ctx context.Context, name string, started, at time.Time) error {
	return s.updateServer(ctx, name, started, `stopped = ?, tftp_transfers = 0, nbd_sessions = 0, bytes_per_sec = 0`, s.d.timeArg(at))
}

// updateServer sets set on the row of name if it is still the one
// registered at started, and tells a missing row from a taken name.
func (s *Store) updateServer(ctx context.Context, name string, started time.Time, set string, args ...any) error {
	started = started.Truncate(time.Microsecond)
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE servers SET `+set+` WHERE name = ? AND started = ?`,
			append(args, name, s.d.timeArg(started))...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var other time.Time
		err = tx.QueryRowContext(ctx, s.d.rebind(`SELECT started FROM servers WHERE name = ?`), name).Scan(scanTime{&other})
		if errors.Is(err, sql.ErrNoRows) {
			return inventory.NotFound("name", "no server %q is registered; it registers again", name)
		}
		if err != nil {
			return s.dbErr("read server", err)
		}
		return inventory.Conflict("name", "server %q registered at %s is now the one started at %s: two servers share the name; give each its own server.name",
			name, started.UTC().Format(time.RFC3339), other.Format(time.RFC3339))
	})
}

// ListServers implements inventory.Servers.
func (s *Store) ListServers(ctx context.Context) ([]inventory.ServerInfo, error) {
	return s.queryServers(ctx, s.r, `SELECT `+serverCols+` FROM servers ORDER BY name`)
}

// RemoveServer implements inventory.Servers.
func (s *Store) RemoveServer(ctx context.Context, name string, now time.Time) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		// Its rows are closed before the DELETEs: SQLite runs the
		// transaction on one connection, which an open result set holds.
		found, err := s.queryServers(ctx, tx, `SELECT `+serverCols+` FROM servers WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return inventory.NotFound("name", "no server %q is registered", name)
		}
		if si := found[0]; si.Status(now) == inventory.ServerLive {
			return inventory.Conflict("name", "server %q is live (last heartbeat %s ago); stop it first, or wait until it is stale (%s without a heartbeat)",
				name, now.Sub(si.Heartbeat).Round(time.Second), inventory.StaleAfter)
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM image_copies WHERE server = ?`, name); err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, `DELETE FROM servers WHERE name = ?`, name)
		return err
	})
}
