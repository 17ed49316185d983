package sqldb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const profileCols = `name, kernel, initrds, cmdline, root_image, overlay, root_kernel, loader, source, arm64, root_channel, root_files, vars`

func scanProfile(sc interface{ Scan(...any) error }) (inventory.Profile, error) {
	var (
		p                      inventory.Profile
		initrds, source, arm64 string
		files, vars            string
	)
	if err := sc.Scan(&p.Name, &p.Kernel, &initrds, &p.Cmdline, &p.Root.Image, &p.Root.Overlay, &p.Root.Kernel, &p.Loader, &source, &arm64, &p.Root.Channel, &files, &vars); err != nil {
		return p, err
	}
	p.Source = inventory.Source(source)
	if err := json.Unmarshal([]byte(initrds), &p.Initrd); err != nil {
		return p, fmt.Errorf("stored initrds of profile %s: %w", p.Name, err)
	}
	if err := json.Unmarshal([]byte(arm64), &p.ARM64); err != nil {
		return p, fmt.Errorf("stored arm64 files of profile %s: %w", p.Name, err)
	}
	if err := scanRootFiles(files, vars, &p.RootFiles, &p.Vars); err != nil {
		return p, fmt.Errorf("profile %s: %w", p.Name, err)
	}
	return p, nil
}

// ListProfiles implements inventory.Profiles.
func (s *Store) ListProfiles(ctx context.Context) ([]inventory.Profile, error) {
	rows, err := s.query(ctx, s.r, `SELECT `+profileCols+` FROM profiles ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Profile{}
	for rows.Next() {
		p, err := scanProfile(rows)
		if err != nil {
			return nil, s.dbErr("read profile", err)
		}
		out = append(out, p)
	}
	return out, s.rowsErr(rows)
}

// GetProfile implements inventory.Profiles.
func (s *Store) GetProfile(ctx context.Context, name string) (inventory.Profile, error) {
	p, err := scanProfile(s.r.QueryRowContext(ctx, s.d.rebind(`SELECT `+profileCols+` FROM profiles WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return p, inventory.NotFound("name", "no profile named %q", name)
	}
	if err != nil {
		return p, s.dbErr("read profile", err)
	}
	return p, nil
}

func profileArgs(p inventory.Profile) ([]any, error) {
	if p.Initrd == nil {
		p.Initrd = []string{}
	}
	rds, err := jsonArg(p.Initrd)
	if err != nil {
		return nil, err
	}
	arm64, err := jsonArg(p.ARM64)
	if err != nil {
		return nil, err
	}
	files, vars, err := rootFileArgs(p.RootFiles, p.Vars)
	if err != nil {
		return nil, err
	}
	return []any{p.Kernel, rds, p.Cmdline, p.Root.Image, p.Root.Overlay, p.Root.Kernel, p.Loader, string(p.Source), arm64, p.Root.Channel, files, vars, p.Name}, nil
}

// CreateProfile implements inventory.Profiles.
func (s *Store) CreateProfile(ctx context.Context, p inventory.Profile) (inventory.Profile, error) {
	if err := p.Validate(); err != nil {
		return p, err
	}
	args, err := profileArgs(p)
	if err != nil {
		return p, err
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT 1 FROM profiles WHERE name = ?`), p.Name).Scan(&one)
		if err == nil {
			return inventory.Conflict("name", "profile %s already exists; change it with PUT or remove it first", p.Name)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return s.dbErr("read profile", err)
		}
		_, err = s.exec(ctx, tx, `INSERT INTO profiles (kernel, initrds, cmdline, root_image, overlay, root_kernel, loader, source, arm64, root_channel, root_files, vars, name)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		return err
	})
	if err != nil {
		return p, err
	}
	return s.GetProfile(ctx, p.Name)
}

// UpdateProfile implements inventory.Profiles.
func (s *Store) UpdateProfile(ctx context.Context, p inventory.Profile) (inventory.Profile, error) {
	if err := p.Validate(); err != nil {
		return p, err
	}
	args, err := profileArgs(p)
	if err != nil {
		return p, err
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE profiles SET kernel = ?, initrds = ?, cmdline = ?, root_image = ?, overlay = ?, root_kernel = ?, loader = ?, source = ?, arm64 = ?,
			root_channel = ?, root_files = ?, vars = ?
			WHERE name = ?`, args...)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("name", "no profile named %q", p.Name))
	})
	if err != nil {
		return p, err
	}
	return s.GetProfile(ctx, p.Name)
}

// DeleteProfile implements inventory.Profiles.
func (s *Store) DeleteProfile(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		n, some, err := s.usersOf(ctx, tx, name)
		if err != nil {
			return err
		}
		if n > 0 {
			return inventory.Conflict("name", "profile %s is used by %d machine(s) (%s); move them to another profile first", name, n, some)
		}
		res, err := s.exec(ctx, tx, `DELETE FROM profiles WHERE name = ?`, name)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("name", "no profile named %q", name))
	})
}
