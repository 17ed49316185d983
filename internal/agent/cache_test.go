package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bootfleet/bootfleet/internal/diskprobe"
)

func TestParseCmdlineCache(t *testing.T) {
	const root = "bootfleet.root=nbd:10.0.0.1:10809:r-x "
	tests := []struct {
		name, cmdline string
		want          CacheOptions
		err           string
	}{
		{"none", root, CacheOptions{}, ""},
		{"ram", root + "bootfleet.overlay=client-ram", CacheOptions{Mode: CacheRAM}, ""},
		{"ram with a size", root + "bootfleet.overlay=client-ram bootfleet.cache.size=512M", CacheOptions{Mode: CacheRAM, Bytes: 512 << 20}, ""},
		{"ram with a share", root + "bootfleet.overlay=client-ram bootfleet.cache.size=40%", CacheOptions{Mode: CacheRAM, Percent: 40}, ""},
		{"disk by path", root + "bootfleet.overlay=client-disk bootfleet.cache=/dev/vda", CacheOptions{Mode: CacheDisk, Device: "/dev/vda"}, ""},
		{"disk by label", "bootfleet.cache=LABEL=bfcache " + root + "bootfleet.overlay=client-disk", CacheOptions{Mode: CacheDisk, Device: "LABEL=bfcache"}, ""},
		{"disk without a device", root + "bootfleet.overlay=client-disk", CacheOptions{}, "needs bootfleet.cache="},
		{"unknown mode", root + "bootfleet.overlay=ephemeral", CacheOptions{}, "want client-ram or client-disk"},
		{"relative device", root + "bootfleet.overlay=client-disk bootfleet.cache=vda", CacheOptions{}, "want a local disk"},
		{"empty label", root + "bootfleet.overlay=client-disk bootfleet.cache=LABEL=", CacheOptions{}, "want a local disk"},
		{"bad size", root + "bootfleet.overlay=client-ram bootfleet.cache.size=lots", CacheOptions{}, "want a size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseCmdline(tt.cmdline)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %+v, %v; want an error containing %q", o.Cache, err, tt.err)
				}
				return
			}
			if err != nil || o.Cache != tt.want {
				t.Fatalf("got %+v, %v; want %+v", o.Cache, err, tt.want)
			}
		})
	}
}

func TestParseCacheSize(t *testing.T) {
	tests := []struct {
		in      string
		bytes   int64
		percent int
		ok      bool
	}{
		{"2G", 2 << 30, 0, true},
		{"512M", 512 << 20, 0, true},
		{"65536K", 64 << 20, 0, true},
		{"67108864", 64 << 20, 0, true},
		{"25%", 0, 25, true},
		{"90%", 0, 90, true},
		{"91%", 0, 0, false},
		{"0%", 0, 0, false},
		{"1M", 0, 0, false}, // below the minimum
		{"-1G", 0, 0, false},
		{"2T", 0, 0, false},
		{"", 0, 0, false},
		{"G", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, pct, err := ParseCacheSize(tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("got %d, %d%%; want an error", n, pct)
				}
				return
			}
			if err != nil || n != tt.bytes || pct != tt.percent {
				t.Fatalf("got %d, %d%%, %v; want %d, %d%%", n, pct, err, tt.bytes, tt.percent)
			}
		})
	}
}

func TestRAMBytes(t *testing.T) {
	const mem = 512<<20 + 123 // MemTotal is never a whole number of pages
	tests := []struct {
		name string
		c    CacheOptions
		want int64
	}{
		{"default share", CacheOptions{Mode: CacheRAM}, (mem / 100 * DefaultRAMPercent) &^ 4095},
		{"share", CacheOptions{Mode: CacheRAM, Percent: 50}, (mem / 100 * 50) &^ 4095},
		{"bytes", CacheOptions{Mode: CacheRAM, Bytes: 100<<20 + 1}, 100 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.RAMBytes(mem); got != tt.want || got%4096 != 0 {
				t.Fatalf("RAMBytes = %d, want %d", got, tt.want)
			}
		})
	}
	if got := BRDParams(128 << 20); got != "rd_nr=1 rd_size=131072 max_part=0" {
		t.Fatalf("BRDParams = %q", got)
	}
}

func TestSnapshotParams(t *testing.T) {
	if got := SnapshotParams("43:1", "1:0", ramChunkSectors); got != "43:1 1:0 N 8" {
		t.Fatalf("SnapshotParams = %q, want %q", got, "43:1 1:0 N 8")
	}
}

func TestParseSnapshotStatus(t *testing.T) {
	tests := []struct {
		in      string
		want    SnapshotUsage
		percent int
		ok      bool
	}{
		{"16/262144 16", SnapshotUsage{Used: 16, Total: 262144}, 0, true},
		{"209715/262144 208", SnapshotUsage{Used: 209715, Total: 262144}, 79, true},
		{"262144/262144 256\n", SnapshotUsage{Used: 262144, Total: 262144}, 100, true},
		{"Invalid", SnapshotUsage{Invalid: true}, 100, true},
		{"Overflow", SnapshotUsage{Invalid: true}, 100, true},
		{"Merge failed", SnapshotUsage{}, 0, false},
		{"16/0 0", SnapshotUsage{}, 0, false},
		{"", SnapshotUsage{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			u, err := ParseSnapshotStatus(tt.in)
			if !tt.ok {
				if err == nil {
					t.Fatalf("got %+v, want an error", u)
				}
				return
			}
			if err != nil || u != tt.want || u.Percent() != tt.percent {
				t.Fatalf("got %+v (%d%%), %v; want %+v (%d%%)", u, u.Percent(), err, tt.want, tt.percent)
			}
		})
	}
}

func TestFindLabeled(t *testing.T) {
	gpt := func(names ...string) diskprobe.Table {
		t := diskprobe.Table{Scheme: "gpt"}
		for i, n := range names {
			t.Partitions = append(t.Partitions, diskprobe.Partition{Number: i + 1, Name: n})
		}
		return t
	}
	tests := []struct {
		name  string
		disks map[string]diskprobe.Table
		disk  string
		num   int
		err   string
	}{
		{"one", map[string]diskprobe.Table{"vda": gpt("esp", "bfcache"), "vdb": gpt("data")}, "vda", 2, ""},
		{"none", map[string]diskprobe.Table{"vda": gpt("esp")}, "", 0, "no GPT partition named"},
		{"two", map[string]diskprobe.Table{"vda": gpt("bfcache"), "nvme0n1": gpt("x", "bfcache")}, "", 0, "2 GPT partitions are named"},
		{"mbr", map[string]diskprobe.Table{"sda": {Scheme: "mbr", Partitions: []diskprobe.Partition{{Number: 1}}}}, "", 0, "no GPT partition named"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disk, num, err := findLabeled(tt.disks, "bfcache")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %s %d, %v; want an error containing %q", disk, num, err, tt.err)
				}
				return
			}
			if err != nil || disk != tt.disk || num != tt.num {
				t.Fatalf("got %s %d, %v; want %s %d", disk, num, err, tt.disk, tt.num)
			}
		})
	}
}

func TestCrossedLevels(t *testing.T) {
	tests := []struct{ percent, warned, want int }{
		{0, 0, 0},
		{49, 0, 0},
		{50, 0, 1},
		{79, 1, 1}, // 50% reported already: nothing new
		{96, 1, 3}, // 80 and 95 crossed between two looks: one report
		{100, 3, 3},
		{60, 2, 2}, // levels are never reported twice, even if the cache shrank
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d%% after %d", tt.percent, tt.warned), func(t *testing.T) {
			if got := crossedLevels(tt.percent, tt.warned); got != tt.want {
				t.Errorf("crossedLevels(%d%%, %d) = %d, want %d", tt.percent, tt.warned, got, tt.want)
			}
		})
	}
}
