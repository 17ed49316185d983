//go:build !linux

package safefs

import (
	"errors"
	"os"
)

func openRoot(p string) (*os.File, error) {
	return nil, errors.New("safefs: only Linux is supported (openat2 RESOLVE_BENEATH is required for safe resolution)")
}

func openBeneath(rt root, rel string) (*os.File, error) {
	return nil, errors.New("safefs: unsupported platform")
}
