//go:build !linux

package blockstore

import "os"

// lockFile is a no-op where flock is not wired up; bootfleet serves NBD
// from Linux.
func lockFile(*os.File) (func(), error) { return func() {}, nil }
