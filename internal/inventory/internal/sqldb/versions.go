package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const versionCols = `image, version, sha256, parent, state, made_by, made, size, stored, promoted, machine, server`

func scanVersion(sc interface{ Scan(...any) error }) (inventory.ImageVersion, error) {
	var v inventory.ImageVersion
	err := sc.Scan(&v.Image, &v.Version, &v.SHA256, &v.Parent, &v.State, &v.By, scanTime{&v.Made}, &v.Size, &v.Stored,
		scanTime{&v.Promoted}, &v.Machine, &v.Server)
	return v, err
}

// ListImageVersions implements inventory.ImageVersions.
func (s *Store) ListImageVersions(ctx context.Context, image string) ([]inventory.ImageVersion, error) {
	if image == "" {
		return s.versions(ctx, s.r, "")
	}
	if _, err := s.GetImage(ctx, image); err != nil {
		return nil, err
	}
	return s.versions(ctx, s.r, image)
}

// versions reads image's versions through q, ordered by number, or every
// image's, ordered by image, when image is "".
func (s *Store) versions(ctx context.Context, q querier, image string) ([]inventory.ImageVersion, error) {
	rows, err := s.query(ctx, q, `SELECT `+versionCols+` FROM image_versions WHERE image = ? OR ? = '' ORDER BY image, version`, image, image)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.ImageVersion{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, s.dbErr("read image version", err)
		}
		out = append(out, v)
	}
	return out, s.rowsErr(rows)
}

// lockImage takes the write lock on image's row for the rest of tx, so
// that two servers changing one image's versions go one after the other
// (PostgreSQL locks the row; SQLite has one writer anyway). It returns
// the image's current version, or 0 when the image does not exist yet.
func (s *Store) lockImage(ctx context.Context, tx *sql.Tx, image string) (int, error) {
	if _, err := s.exec(ctx, tx, `UPDATE images SET version = version WHERE name = ?`, image); err != nil {
		return 0, err
	}
	var cur int
	err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT version FROM images WHERE name = ?`), image).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, s.dbErr("read image", err)
	}
	return cur, nil
}

// AddImageVersion implements inventory.ImageVersions.
func (s *Store) AddImageVersion(ctx context.Context, v inventory.ImageVersion) (inventory.ImageVersion, error) {
	if err := v.Validate(s.now()); err != nil {
		return v, err
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.lockImage(ctx, tx, v.Image)
		if err != nil {
			return err
		}
		vs, err := s.versions(ctx, tx, v.Image)
		if err != nil {
			return err
		}
		if cur == 0 || len(vs) == 0 {
			v.State, v.Machine = inventory.VersionProduction, ""
		}
		v.Version = 1
		parentFound := v.Parent == 0
		for _, o := range vs {
			v.Version = max(v.Version, o.Version+1)
			parentFound = parentFound || o.Version == v.Parent
			if v.State == inventory.VersionMaintenance && o.State == inventory.VersionMaintenance {
				return inventory.Conflict("name", "image %s already has maintenance version %d open, held by machine %s; commit or abandon it first",
					v.Image, o.Version, o.Machine)
			}
		}
		if !parentFound {
			return inventory.Invalid("parent", "image %s has no version %d to build on", v.Image, v.Parent)
		}
		if v.State == inventory.VersionProduction {
			v.Promoted = v.Made
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO image_versions (`+versionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.Image, v.Version, v.SHA256, v.Parent, string(v.State), v.By, s.d.timeArg(v.Made), v.Size, v.Stored,
			s.d.timeArg(v.Promoted), v.Machine, v.Server); err != nil {
			return err
		}
		if v.State == inventory.VersionProduction {
			return s.setCurrent(ctx, tx, v)
		}
		return nil
	})
	return v, err
}

// setCurrent makes v its image's current production version.
func (s *Store) setCurrent(ctx context.Context, tx *sql.Tx, v inventory.ImageVersion) error {
	_, err := s.exec(ctx, tx, `INSERT INTO images (name, sha256, size, imported, version) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, size = excluded.size, imported = excluded.imported, version = excluded.version`,
		v.Image, v.SHA256, v.Size, s.d.timeArg(v.Promoted), v.Version)
	return err
}

// StepImageVersion implements inventory.ImageVersions.
func (s *Store) StepImageVersion(ctx context.Context, image string, version int, op inventory.VersionOp, at time.Time) (inventory.ImageVersion, error) {
	return s.step(ctx, image, version, op, at, nil)
}

// CommitImageVersion implements inventory.ImageVersions.
func (s *Store) CommitImageVersion(ctx context.Context, image string, version int, sha string, stored int64, at time.Time) (inventory.ImageVersion, error) {
	probe := inventory.Image{Name: image, SHA256: sha, Size: 1}
	if err := probe.Validate(at); err != nil {
		return inventory.ImageVersion{}, err
	}
	return s.step(ctx, image, version, inventory.OpCommit, at, func(tx *sql.Tx, v *inventory.ImageVersion) error {
		v.SHA256, v.Stored = sha, stored
		_, err := s.exec(ctx, tx, `UPDATE image_versions SET sha256 = ?, stored = ? WHERE image = ? AND version = ?`, sha, stored, image, version)
		return err
	})
}

// step applies op in one transaction, then more, if set, to the version.
func (s *Store) step(ctx context.Context, image string, version int, op inventory.VersionOp, at time.Time,
	more func(*sql.Tx, *inventory.ImageVersion) error) (inventory.ImageVersion, error) {
	if at.IsZero() {
		at = s.now()
	}
	var out inventory.ImageVersion
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.lockImage(ctx, tx, image)
		if err != nil {
			return err
		}
		if cur == 0 {
			return inventory.NotFound("name", "no image named %q", image)
		}
		vs, err := s.versions(ctx, tx, image)
		if err != nil {
			return err
		}
		if op == inventory.OpRollback {
			version = cur
		}
		i := indexOf(vs, version)
		if i < 0 {
			return inventory.NotFound("version", "image %s has no version %d; see bootfleet image versions %s", image, version, image)
		}
		v := vs[i]
		next, err := inventory.Step(v.State, op, v.Version == cur)
		if err != nil {
			return err
		}
		now := at
		switch op {
		case inventory.OpAbandon:
			out = v
			_, err := s.exec(ctx, tx, `DELETE FROM image_versions WHERE image = ? AND version = ?`, image, version)
			return err
		case inventory.OpPromote:
			v.Promoted = now
			if err := s.setCurrent(ctx, tx, v); err != nil {
				return err
			}
		case inventory.OpRetire:
			if err := s.refusePinned(ctx, tx, image, version); err != nil {
				return err
			}
		case inventory.OpRollback:
			prev := previousProduction(vs, cur)
			if prev < 0 {
				return inventory.Conflict("version", "image %s has no earlier production version to roll back to; promote a test version instead", image)
			}
			p := vs[prev]
			p.Promoted = now
			if _, err := s.exec(ctx, tx, `UPDATE image_versions SET promoted = ? WHERE image = ? AND version = ?`,
				s.d.timeArg(now), image, p.Version); err != nil {
				return err
			}
			if err := s.setCurrent(ctx, tx, p); err != nil {
				return err
			}
		}
		v.State = next
		if next != inventory.VersionMaintenance {
			v.Machine, v.Server = "", ""
		}
		if _, err := s.exec(ctx, tx, `UPDATE image_versions SET state = ?, promoted = ?, machine = ?, server = ? WHERE image = ? AND version = ?`,
			string(v.State), s.d.timeArg(v.Promoted), v.Machine, v.Server, image, version); err != nil {
			return err
		}
		if more != nil {
			if err := more(tx, &v); err != nil {
				return err
			}
		}
		out = v
		return nil
	})
	return out, err
}

// refusePinned fails with ErrConflict while a profile, or a machine of a
// profile of that image, pins the version: retiring it would leave them
// nothing to boot.
func (s *Store) refusePinned(ctx context.Context, tx *sql.Tx, image string, version int) error {
	pin := strconv.Itoa(version)
	rows, err := s.query(ctx, tx, `SELECT 'profile ' || name FROM profiles WHERE root_image = ? AND root_channel = ?
		UNION ALL SELECT 'machine ' || m.mac FROM machines m JOIN profiles p ON p.name = m.profile
		WHERE p.root_image = ? AND m.root_channel = ? ORDER BY 1`, image, pin, image, pin)
	if err != nil {
		return err
	}
	defer rows.Close()
	var pins []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return s.dbErr("read profile", err)
		}
		pins = append(pins, p)
	}
	if err := s.rowsErr(rows); err != nil {
		return err
	}
	if len(pins) > 0 {
		return inventory.Conflict("version", "version %d of image %s is pinned by %s; change their root channel first", version, image, strings.Join(pins, ", "))
	}
	return nil
}

func indexOf(vs []inventory.ImageVersion, version int) int {
	for i, v := range vs {
		if v.Version == version {
			return i
		}
	}
	return -1
}

// previousProduction is the index of the production version other than
// cur promoted last, or -1.
func previousProduction(vs []inventory.ImageVersion, cur int) int {
	best := -1
	for i, v := range vs {
		if v.State != inventory.VersionProduction || v.Version == cur {
			continue
		}
		if best < 0 || v.Promoted.After(vs[best].Promoted) {
			best = i
		}
	}
	return best
}
