package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

// blkrrpart is BLKRRPART, _IO(0x12, 95): re-read the partition table.
const blkrrpart = 0x125f

// findRoot reads the NBD device's partition table and file systems and
// returns the block device to mount (dev itself, or one of its partitions)
// and the file system type to mount it as.
func (a *Agent) findRoot(dev string, o Options) (string, string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", "", fmt.Errorf("open %s to find the root file system: %w", dev, err)
	}
	defer f.Close()
	size, err := deviceSize(dev)
	if err != nil {
		return "", "", err
	}
	// The kernel scans partitions on open too; asking again makes sure the
	// partition devices exist before we look for them.
	unix.Syscall(unix.SYS_IOCTL, f.Fd(), blkrrpart, 0)
	root, err := diskprobe.FindRoot(f, size, o.RootPart)
	if err != nil {
		return "", "", fmt.Errorf("find the root file system on %s: %w", dev, err)
	}
	fstype := o.FSType
	if fstype == "" {
		fstype = root.FS.Type
	}
	if fstype == "" {
		return "", "", fmt.Errorf("%s: %s, but no file system there that bootfleet recognises (ext4, xfs, btrfs); set bootfleet.rootfstype=", dev, root.Reason)
	}
	a.Log.Info("root found", "dev", dev, "where", root.Reason, "fstype", fstype, "label", root.FS.Label)
	if root.Partition == nil {
		return dev, fstype, nil
	}
	part := partitionDevice(dev, root.Partition.Number)
	deadline := time.Now().Add(deviceWaitMax)
	for {
		if _, err := os.Stat(part); err == nil {
			return part, fstype, nil
		}
		if time.Now().After(deadline) {
			have, _ := filepath.Glob(dev + "p*")
			return "", "", fmt.Errorf("%s has partition %d but %s did not appear in %v (partition devices: %s); was the nbd module loaded with max_part=0?",
				dev, root.Partition.Number, part, deviceWaitMax, strings.Join(have, " "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// partitionDevice is the kernel's name for partition n of dev: a "p"
// between them when dev's name ends in a digit (nbd0p1, not nbd01).
func partitionDevice(dev string, n int) string {
	if last := dev[len(dev)-1]; last >= '0' && last <= '9' {
		return fmt.Sprintf("%sp%d", dev, n)
	}
	return fmt.Sprintf("%s%d", dev, n)
}

func deviceSize(dev string) (int64, error) {
	b, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/size")
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dev, err)
	}
	var sectors int64
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &sectors); err != nil {
		return 0, fmt.Errorf("size of %s: %q: %w", dev, b, err)
	}
	return sectors * 512, nil
}
