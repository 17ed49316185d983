package agent

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

// CacheMode is where a machine keeps the writes to its read-only root
// (bootfleet.overlay=, which the server adds for profiles whose
// root.overlay is client-ram or client-disk).
type CacheMode string

// The cache modes; CacheNone is a root the server writes to, or a
// read-only one.
const (
	CacheNone CacheMode = ""
	CacheRAM  CacheMode = "client-ram"
	CacheDisk CacheMode = "client-disk"
)

// Cache sizes and chunks.
const (
	// DefaultRAMPercent is the share of the machine's RAM a client-ram
	// cache may fill unless bootfleet.cache.size= says otherwise.
	DefaultRAMPercent = 25
	// MinCacheBytes is the smallest cache the agent accepts: below it an
	// ordinary boot's writes (logs, the journal) fill it within minutes.
	MinCacheBytes = 64 << 20
	// ramChunkSectors and diskChunkSectors are the snapshot's chunk
	// sizes (4 KiB, 32 KiB). A written chunk is copied whole from the
	// server first, so small is cheaper on the network and in RAM; but
	// the kernel keeps every exception in memory, about 40 bytes a chunk,
	// which for a large local disk calls for larger chunks.
	ramChunkSectors  = 8
	diskChunkSectors = 64
)

// CacheOptions is the write cache the command line asks for.
type CacheOptions struct {
	Mode CacheMode
	// Device is bootfleet.cache=: /dev/NAME or LABEL=NAME, NAME being a
	// GPT partition name (it survives the wipe, a file system label does
	// not). client-disk only; required there.
	Device string
	// Bytes or Percent is bootfleet.cache.size= (N, NK, NM, NG or N%):
	// how much of the machine's RAM a client-ram cache may fill. Both zero
	// means DefaultRAMPercent.
	Bytes   int64
	Percent int
}

// set takes one bootfleet.overlay=, bootfleet.cache= or
// bootfleet.cache.size= parameter.
func (c *CacheOptions) set(key, value string) error {
	switch key {
	case "bootfleet.overlay":
		switch m := CacheMode(value); m {
		case CacheRAM, CacheDisk:
			c.Mode = m
		default:
			return fmt.Errorf("bootfleet.overlay=%q: want client-ram or client-disk (the profile's root.overlay)", value)
		}
	case "bootfleet.cache":
		if !strings.HasPrefix(value, "/dev/") && !strings.HasPrefix(value, "LABEL=") || value == "/dev/" || value == "LABEL=" {
			return fmt.Errorf("bootfleet.cache=%q: want a local disk, /dev/vda or LABEL=NAME (a GPT partition name)", value)
		}
		c.Device = value
	case "bootfleet.cache.size":
		n, pct, err := ParseCacheSize(value)
		if err != nil {
			return err
		}
		c.Bytes, c.Percent = n, pct
	}
	return nil
}

// check is what set cannot see alone: client-disk needs its disk.
func (c CacheOptions) check() error {
	if c.Mode == CacheDisk && c.Device == "" {
		return fmt.Errorf("bootfleet.overlay=client-disk needs bootfleet.cache=/dev/NAME or bootfleet.cache=LABEL=NAME: the local disk to wipe and keep the root's writes on (add it to the profile's cmdline)")
	}
	return nil
}

// ParseCacheSize parses bootfleet.cache.size=: bytes with an optional K,
// M or G suffix (powers of 1024), or a percentage of RAM from 1 to 90.
func ParseCacheSize(s string) (bytes int64, percent int, err error) {
	bad := fmt.Errorf("bootfleet.cache.size=%q: want a size like 512M or 2G, or a share of RAM like 25%%", s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 90 {
			return 0, 0, fmt.Errorf("%w (from 1%% to 90%%)", bad)
		}
		return 0, n, nil
	}
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, 0, bad
	}
	if n*mult < MinCacheBytes {
		return 0, 0, fmt.Errorf("%w: at least %d MiB", bad, MinCacheBytes>>20)
	}
	return n * mult, 0, nil
}

// RAMBytes is the size of a client-ram cache on a machine with memTotal
// bytes of RAM, rounded down to whole 4 KiB pages. It may exceed what the
// machine can spare: brd takes pages only as chunks are written.
func (c CacheOptions) RAMBytes(memTotal int64) int64 {
	n := c.Bytes
	if n == 0 {
		pct := c.Percent
		if pct == 0 {
			pct = DefaultRAMPercent
		}
		n = memTotal / 100 * int64(pct)
	}
	return n &^ 4095
}

// BRDParams are the brd module's parameters for one RAM disk of n bytes:
// brd counts in KiB, and partition scanning is of no use on it.
func BRDParams(n int64) string {
	return fmt.Sprintf("rd_nr=1 rd_size=%d max_part=0", n>>10)
}

// SnapshotParams are the device-mapper snapshot target's parameters for
// a copy-on-write device over origin with its exceptions on cow, both
// MAJOR:MINOR (no device nodes needed). The exception store is transient
// (N): the kernel keeps the map in memory and reads nothing back from
// cow, so whatever the cache held before this boot is never seen.
func SnapshotParams(origin, cow string, chunkSectors int) string {
	return fmt.Sprintf("%s %s N %d", origin, cow, chunkSectors)
}

// SnapshotUsage is a snapshot target's status: the sectors of its cache
// in use and in all, or Invalid once it overflowed (the kernel then fails
// every I/O on the device).
type SnapshotUsage struct {
	Used, Total int64
	Invalid     bool
}

// Percent is how full the cache is, 0 to 100.
func (u SnapshotUsage) Percent() int {
	if u.Invalid {
		return 100
	}
	if u.Total == 0 {
		return 0
	}
	return int(u.Used * 100 / u.Total)
}

// ParseSnapshotStatus reads the status line of a snapshot target:
// "USED/TOTAL METADATA", "Invalid", "Overflow" or "Merge failed".
func ParseSnapshotStatus(s string) (SnapshotUsage, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "Invalid", "Overflow":
		return SnapshotUsage{Invalid: true}, nil
	}
	frac, _, _ := strings.Cut(s, " ")
	used, total, ok := strings.Cut(frac, "/")
	u, err1 := strconv.ParseInt(used, 10, 64)
	t, err2 := strconv.ParseInt(total, 10, 64)
	if !ok || err1 != nil || err2 != nil || u < 0 || t <= 0 {
		return SnapshotUsage{}, fmt.Errorf("snapshot status %q: want USED/TOTAL METADATA, Invalid or Overflow", s)
	}
	return SnapshotUsage{Used: u, Total: t}, nil
}

// cacheWarnAt are the fill levels, in percent, the cache watcher reports,
// each once.
var cacheWarnAt = []int{50, 80, 95}

// crossedLevels is how many of cacheWarnAt a cache percent full has
// reached; warned of them were reported already. One report covers
// several levels crossed between two looks.
func crossedLevels(percent, warned int) int {
	for warned < len(cacheWarnAt) && percent >= cacheWarnAt[warned] {
		warned++
	}
	return warned
}

// findLabeled is the partition named label among disks (a table by disk
// name, e.g. "vda"), as the disk's name and the partition's number. More
// than one is an error: wiping the wrong disk is not a guess to make.
func findLabeled(disks map[string]diskprobe.Table, label string) (string, int, error) {
	var found []string
	var disk string
	var num int
	for name, t := range disks {
		for _, p := range t.Partitions {
			if p.Name == label {
				found = append(found, fmt.Sprintf("%s partition %d", name, p.Number))
				disk, num = name, p.Number
			}
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", 0, fmt.Errorf("no GPT partition named %q on any local disk", label)
	case 1:
		return disk, num, nil
	}
	return "", 0, fmt.Errorf("%d GPT partitions are named %q (%s); name one only, or give bootfleet.cache=/dev/NAME", len(found), label, strings.Join(found, ", "))
}
