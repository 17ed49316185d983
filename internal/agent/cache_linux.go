package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

// dmName is the device-mapper name of the root's copy-on-write device.
const dmName = "bootfleet-root"

// setupCache puts a copy-on-write device over origin, the root's block
// device on the read-only NBD export, when the command line asks for a
// client-side cache, and returns the device to mount: origin itself when
// it does not. A cache it cannot make is an error, never a fallback to
// somewhere else: the boot stops and says what to fix.
func (a *Agent) setupCache(o Options, origin string) (string, error) {
	if o.Cache.Mode == CacheNone {
		return origin, nil
	}
	sectors, err := sysSectors(origin)
	if err != nil {
		return "", err
	}
	var cow string
	chunk := ramChunkSectors
	if o.Cache.Mode == CacheRAM {
		cow, err = a.ramDisk(o.Cache)
	} else {
		cow, err = a.cacheDisk(o.Cache)
		chunk = diskChunkSectors
	}
	if err != nil {
		a.milestone(o, "agent-cache-refused")
		return "", err
	}
	cowSectors, err := sysSectors(cow)
	if err != nil {
		return "", err
	}
	originNum, err := devNumber(origin)
	if err != nil {
		return "", err
	}
	cowNum, err := devNumber(cow)
	if err != nil {
		return "", err
	}
	params := SnapshotParams(originNum, cowNum, chunk)
	dev, err := dmCreate(dmName, sectors, "snapshot", params)
	if err != nil {
		return "", fmt.Errorf("device-mapper snapshot %q over %s: %w (is dm_snapshot in the initramfs?)", params, origin, err)
	}
	a.mark("BOOTFLEET-CACHE: %s %s on %s cache=%dMiB over %s", o.Cache.Mode, dev, cow, cowSectors>>11, origin)
	a.milestone(o, "agent-cache-ready")
	if err := a.startCacheWatcher(o); err != nil {
		// Not fatal: the cache works; only its overflow goes unreported.
		a.Log.Warn("cache watcher not started; an overflowing cache will fail the root without a word from bootfleet", "err", err)
	}
	return dev, nil
}

// ramDisk loads brd with one RAM disk of the cache's size and returns it.
// brd takes memory only as chunks are written; what it holds is never
// swapped or compressed, so the size is the bound on what the cache costs.
func (a *Agent) ramDisk(c CacheOptions) (string, error) {
	mem, err := memTotal()
	if err != nil {
		return "", err
	}
	n := c.RAMBytes(mem)
	if n < MinCacheBytes {
		return "", fmt.Errorf("client-ram: a cache of %d MiB (of %d MiB RAM) is below the %d MiB minimum; give bootfleet.cache.size= or use client-disk", n>>20, mem>>20, MinCacheBytes>>20)
	}
	f, err := os.Open(filepath.Join(ModulesDir, "brd.ko"))
	if err != nil {
		return "", fmt.Errorf("client-ram needs the brd module in the initramfs (rebuild it with `bootfleet initramfs build`): %w", err)
	}
	err = unix.FinitModule(int(f.Fd()), BRDParams(n), 0)
	f.Close()
	if errors.Is(err, unix.EEXIST) {
		a.Log.Warn("brd was loaded already; its RAM disk keeps the size it has", "want_bytes", n)
	} else if err != nil {
		return "", fmt.Errorf("load brd (%s): %w", BRDParams(n), err)
	}
	if err := waitBlock("ram0"); err != nil {
		return "", err
	}
	a.Log.Info("RAM disk for the write cache", "dev", "/dev/ram0", "bytes", n, "ram_bytes", mem)
	return "/dev/ram0", nil
}

// cacheDisk finds the local disk bootfleet.cache= names, checks it is big
// enough and wipes it (discards its blocks, where the disk can).
func (a *Agent) cacheDisk(c CacheOptions) (string, error) {
	var dev string
	deadline := time.Now().Add(deviceWaitMax)
	for {
		var err error
		dev, err = resolveCache(c.Device)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("client-disk: cache %s: %w after %v (is its driver, e.g. virtio_blk, nvme or ahci, in the initramfs?); refusing to keep the root's writes anywhere else", c.Device, err, deviceWaitMax)
		}
		time.Sleep(200 * time.Millisecond)
	}
	sectors, err := sysSectors(dev)
	if err != nil {
		return "", err
	}
	if sectors*512 < MinCacheBytes {
		return "", fmt.Errorf("client-disk: cache %s (%s) holds %d MiB; want at least %d MiB", c.Device, dev, sectors>>11, MinCacheBytes>>20)
	}
	f, err := os.OpenFile(dev, os.O_RDWR|unix.O_EXCL, 0)
	if err != nil {
		return "", fmt.Errorf("client-disk: open cache %s: %w", dev, err)
	}
	defer f.Close()
	rng := [2]uint64{0, uint64(sectors) * 512}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKDISCARD, uintptr(unsafe.Pointer(&rng[0]))); e != 0 {
		// Nothing of the old content is read either way: the snapshot's
		// transient store maps only this boot's writes.
		a.Log.Warn("cache disk cannot discard; its old blocks stay on it, unread", "dev", dev, "err", e)
	} else {
		a.Log.Info("cache disk wiped", "dev", dev, "bytes", rng[1])
	}
	return dev, nil
}

// resolveCache turns bootfleet.cache= into a block device that exists now.
func resolveCache(spec string) (string, error) {
	if label, ok := strings.CutPrefix(spec, "LABEL="); ok {
		disks := map[string]diskprobe.Table{}
		entries, _ := os.ReadDir("/sys/block")
		for _, e := range entries {
			if !localDisk(e.Name()) {
				continue
			}
			if t, err := readTable("/dev/" + e.Name()); err == nil {
				disks[e.Name()] = t
			}
		}
		disk, n, err := findLabeled(disks, label)
		if err != nil {
			return "", err
		}
		return partitionDevice("/dev/"+disk, n), nil
	}
	name := filepath.Base(spec)
	if !localDisk(name) {
		return "", fmt.Errorf("%s is not a local disk (NBD, RAM, loop and device-mapper devices cannot be the cache)", spec)
	}
	if _, err := os.Stat("/sys/class/block/" + name); err != nil {
		return "", errors.New("no such block device")
	}
	return spec, nil
}

// localDisk says whether a /sys/block name can be a cache disk.
func localDisk(name string) bool {
	for _, p := range []string{"nbd", "ram", "loop", "dm-", "zram", "sr", "fd"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return name != ""
}

func readTable(dev string) (diskprobe.Table, error) {
	f, err := os.Open(dev)
	if err != nil {
		return diskprobe.Table{}, err
	}
	defer f.Close()
	n, err := sysSectors(dev)
	if err != nil {
		return diskprobe.Table{}, err
	}
	return diskprobe.ReadTable(f, n*512)
}

// sysSectors is a block device's size in 512-byte sectors.
func sysSectors(dev string) (int64, error) {
	b, err := os.ReadFile("/sys/class/block/" + filepath.Base(dev) + "/size")
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dev, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %q: %w", dev, b, err)
	}
	return n, nil
}

// devNumber is a block device's MAJOR:MINOR.
func devNumber(dev string) (string, error) {
	b, err := os.ReadFile("/sys/class/block/" + filepath.Base(dev) + "/dev")
	if err != nil {
		return "", fmt.Errorf("device number of %s: %w", dev, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func waitBlock(name string) error {
	deadline := time.Now().Add(deviceWaitMax)
	for {
		if _, err := os.Stat("/dev/" + name); err == nil {
			if n, err := sysSectors(name); err == nil && n > 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("/dev/%s did not appear in %v", name, deviceWaitMax)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memTotal is MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("read /proc/meminfo: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}
