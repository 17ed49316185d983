package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// SetImageCopies implements inventory.ImageCopies.
func (s *Store) SetImageCopies(ctx context.Context, server string, copies []inventory.ImageCopy) error {
	if !inventory.ValidServerName(server) {
		return inventory.Invalid("server", "want a server name (letters, digits, . _ -, at most 253), got %q", server)
	}
	now := s.now()
	for i := range copies {
		if err := copies[i].Validate(now); err != nil {
			return err
		}
		if copies[i].Server != server {
			return inventory.Invalid("server", "copy of %s names server %q, want %q", copies[i].SHA256, copies[i].Server, server)
		}
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM image_copies WHERE server = ?`, server); err != nil {
			return err
		}
		for _, c := range copies {
			if err := s.insertCopy(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddImageCopy implements inventory.ImageCopies.
func (s *Store) AddImageCopy(ctx context.Context, c inventory.ImageCopy) error {
	if err := c.Validate(s.now()); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error { return s.insertCopy(ctx, tx, c) })
}

func (s *Store) insertCopy(ctx context.Context, tx *sql.Tx, c inventory.ImageCopy) error {
	_, err := s.exec(ctx, tx, `INSERT INTO image_copies (server, sha256, since) VALUES (?, ?, ?)
		ON CONFLICT (server, sha256) DO NOTHING`, c.Server, c.SHA256, s.d.timeArg(c.Since))
	return err
}

// RemoveImageCopy implements inventory.ImageCopies.
func (s *Store) RemoveImageCopy(ctx context.Context, server, sha string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `DELETE FROM image_copies WHERE server = ? AND sha256 = ?`, server, sha)
		return err
	})
}

// ListImageCopies implements inventory.ImageCopies.
func (s *Store) ListImageCopies(ctx context.Context) ([]inventory.ImageCopy, error) {
	rows, err := s.query(ctx, s.r, `SELECT server, sha256, since FROM image_copies ORDER BY sha256, server`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.ImageCopy{}
	for rows.Next() {
		var c inventory.ImageCopy
		if err := rows.Scan(&c.Server, &c.SHA256, scanTime{&c.Since}); err != nil {
			return nil, s.dbErr("read image copy", err)
		}
		out = append(out, c)
	}
	return out, s.rowsErr(rows)
}

// ImageHolders implements inventory.ImageCopies.
func (s *Store) ImageHolders(ctx context.Context, sha string) ([]inventory.ServerInfo, error) {
	return s.queryServers(ctx, s.r, `SELECT `+serverCols+` FROM servers
		JOIN image_copies ON server = name WHERE sha256 = ? ORDER BY name`, sha)
}

// queryServers runs sqlText, which selects serverCols, on q and reads its
// rows; they are closed when it returns.
func (s *Store) queryServers(ctx context.Context, q querier, sqlText string, args ...any) ([]inventory.ServerInfo, error) {
	rows, err := s.query(ctx, q, sqlText, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.ServerInfo{}
	for rows.Next() {
		si, err := s.scanServer(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, si)
	}
	return out, s.rowsErr(rows)
}

// scanServer reads one row of serverCols.
func (s *Store) scanServer(rows *sql.Rows) (inventory.ServerInfo, error) {
	var (
		si    inventory.ServerInfo
		addrs string
	)
	if err := rows.Scan(&si.Name, &addrs, &si.Version, scanTime{&si.Started}, scanTime{&si.Heartbeat}, scanTime{&si.Stopped},
		&si.Load.TFTPTransfers, &si.Load.NBDSessions, &si.Load.BytesPerSec, &si.Instance); err != nil {
		return si, s.dbErr("read server", err)
	}
	if err := json.Unmarshal([]byte(addrs), &si.Addrs); err != nil {
		return si, s.dbErr("read server "+si.Name+" addresses", err)
	}
	return si, nil
}
