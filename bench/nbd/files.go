package nbd

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// sameExport fails unless the export holds file's bytes: a server serving
// other bytes must never become a number.
func sameExport(ctx context.Context, uri, file string) error {
	cmd := exec.CommandContext(ctx, "nbdcopy", uri, "-")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	cmpErr := sameReaders(stdout, file)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("nbdcopy %s -: %w: %s", uri, err, harness.Tail(stderr.String(), 300))
	}
	if cmpErr != nil {
		return fmt.Errorf("%s serves other bytes than %s: %w", uri, file, cmpErr)
	}
	return nil
}

func sameFiles(a, b string) error {
	f, err := os.Open(a)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := sameReaders(f, b); err != nil {
		return fmt.Errorf("%s differs from %s: %w", a, b, err)
	}
	return nil
}

// sameReaders compares r with file's contents, 1 MiB at a time.
func sameReaders(r io.Reader, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; {
		n, errA := io.ReadFull(r, a)
		m, errB := io.ReadFull(f, b)
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			return fmt.Errorf("first difference in the MiB at offset %d", off)
		}
		off += int64(n)
		if errA != nil || errB != nil {
			if (errA == io.EOF || errA == io.ErrUnexpectedEOF) && (errB == io.EOF || errB == io.ErrUnexpectedEOF) {
				return nil
			}
			return errors.Join(errA, errB)
		}
	}
}

// findFile returns the first regular file under dir of exactly size bytes
// whose path contains sub.
func findFile(dir string, size int64, sub string) (string, error) {
	files, err := findFiles(dir, size, sub)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no file of %d bytes under %s", size, dir)
	}
	return files[0], nil
}

// findFiles lists the regular files under dir whose path contains sub and,
// when size >= 0, whose size is size.
func findFiles(dir string, size int64, sub string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.Contains(path, sub) {
			return err
		}
		if info, err := d.Info(); err == nil && (size < 0 || info.Size() == size) {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

func randomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
