package blockstore

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking flock on f. flock locks belong
// to the open file, so a second open in the same process is refused too.
func lockFile(f *os.File) (func(), error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
