// Package durable writes files so that a crash or power loss leaves either
// the old content or the new, never a torn file, and makes directory
// changes (creations, renames, removals) themselves survive a crash.
package durable

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data: a temporary file in the same
// directory is written and fsynced, renamed over path, and the directory
// is fsynced. The file gets exactly mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteWith(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith is WriteFile of what write writes, for content too large to
// hold in memory; when write fails, path is left as it was.
func WriteWith(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	werr := write(tmp)
	perr := tmp.Chmod(perm)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, perr, serr, cerr); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, so the entries changed in it are on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
