package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

const imageCols = `name, sha256, size, imported, version`

func scanImage(sc interface{ Scan(...any) error }) (inventory.Image, error) {
	var img inventory.Image
	err := sc.Scan(&img.Name, &img.SHA256, &img.Size, scanTime{&img.Imported}, &img.Version)
	return img, err
}

// ListImages implements inventory.Images.
func (s *Store) ListImages(ctx context.Context) ([]inventory.Image, error) {
	rows, err := s.query(ctx, s.r, `SELECT `+imageCols+` FROM images ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []inventory.Image{}
	for rows.Next() {
		img, err := scanImage(rows)
		if err != nil {
			return nil, s.dbErr("read image", err)
		}
		out = append(out, img)
	}
	return out, s.rowsErr(rows)
}

// GetImage implements inventory.Images.
func (s *Store) GetImage(ctx context.Context, name string) (inventory.Image, error) {
	img, err := scanImage(s.r.QueryRowContext(ctx, s.d.rebind(`SELECT `+imageCols+` FROM images WHERE name = ?`), name))
	if errors.Is(err, sql.ErrNoRows) {
		return img, inventory.NotFound("name", "no image named %q; import it with: bootfleet image import %s FILE", name, name)
	}
	if err != nil {
		return img, s.dbErr("read image", err)
	}
	return img, nil
}

// PutImage implements inventory.Images.
func (s *Store) PutImage(ctx context.Context, img inventory.Image) (inventory.Image, error) {
	if err := img.Validate(s.now()); err != nil {
		return img, err
	}
	_, err := s.AddImageVersion(ctx, inventory.ImageVersion{Image: img.Name, SHA256: img.SHA256, Size: img.Size,
		Made: img.Imported, State: inventory.VersionProduction})
	if err != nil {
		return img, err
	}
	return s.GetImage(ctx, img.Name)
}

// DeleteImage implements inventory.Images.
func (s *Store) DeleteImage(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := s.query(ctx, tx, `SELECT name FROM profiles WHERE root_image = ? ORDER BY name`, name)
		if err != nil {
			return err
		}
		var users []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return s.dbErr("read profile", err)
			}
			users = append(users, p)
		}
		rows.Close()
		if err := s.rowsErr(rows); err != nil {
			return err
		}
		if len(users) > 0 {
			return inventory.Conflict("name", "image %s is the root of profile(s) %s; change or remove them first", name, strings.Join(users, ", "))
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM image_versions WHERE image = ?`, name); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, `DELETE FROM images WHERE name = ?`, name)
		if err != nil {
			return err
		}
		return mustAffect(res, inventory.NotFound("name", "no image named %q", name))
	})
}
