package nbd

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// fixture is a small run, 3 rounds of 2 repetitions, with fixed figures:
// even counts (so medians are means of the middle two), a failed run, a
// case where bootfleet failed, and readers with disk figures.
func fixture() report {
	const work = "/dev/shm/bf-nbdbench.abc123"
	o := options{rounds: 3, readerRounds: 2, shortRepeat: 2, runtime: 4, cases: allCases, out: "x.md", bootfleet: "bin/bootfleet"}
	res := results{cmds: map[string]string{}}
	uris := map[string]string{
		"bf-none": "nbd://127.0.0.1:10809/m-52-54-00-bf-00-01-aa", "bf-pers": "nbd://127.0.0.1:10809/m-52-54-00-bf-00-02-bb",
		"bf-disk": "nbd://127.0.0.1:10819/m-52-54-00-bf-00-03-cc", "bf-sm": "nbd://127.0.0.1:10819/m-52-54-00-bf-01-01-dd",
		"qemu-ro": "nbd://127.0.0.1:10811/disk", "qemu-rw": "nbd://127.0.0.1:10812/disk", "qemu-sm": "nbd://127.0.0.1:10821/disk", "qemu-rwd": "nbd://127.0.0.1:10832/disk",
		"kit-ro": "nbd://127.0.0.1:10813", "kit-rw": "nbd://127.0.0.1:10814", "kit-sm": "nbd://127.0.0.1:10823", "kit-rwd": "nbd://127.0.0.1:10834",
		"nbds-ro": "nbd://127.0.0.1:10815/ro", "nbds-rw": "nbd://127.0.0.1:10815/rw", "nbds-sm": "nbd://127.0.0.1:10815/small", "nbds-rwd": "nbd://127.0.0.1:10815/rwdisk",
	}
	add := func(c, k, round string, v, scpu, ccpu float64) {
		res.samples = append(res.samples, sample{Case: c, Key: k, Round: round, Value: v, ServerCPU: scpu, ClientCPU: ccpu})
		res.cmds[c+"/"+k] = fmt.Sprintf("client %s %s", c, uris[k])
	}
	// Sequential read: bootfleet ahead in every run, by 20% to 30%.
	seq := map[string]float64{"bf-none": 1000, "bf-pers": 1010, "qemu-ro": 600, "kit-ro": 800, "nbds-ro": 780, "ceil": 5800, "ceil2": 4600}
	for r := 1; r <= 3; r++ {
		for i := 1; i <= 2; i++ {
			j := float64(r*2 + i)
			for _, k := range with(readerKeys, "ceil", "ceil2") {
				add("seq", k, fmt.Sprintf("%d.%d", r, i), seq[k]*(1+0.01*j), 0.2+0.01*j, 0.7+0.01*j)
			}
		}
	}
	res.cmds["seq/ceil2"] = "nbdcopy " + work + "/disk.img null:"
	// Random read: nbdkit's median ahead, bootfleet ahead in 2 of 3 rounds;
	// qemu-nbd failed once.
	rr := map[string][]float64{"bf-none": {45000, 40000, 46000}, "bf-pers": {41000, 43000, 42000}, "qemu-ro": {25000, math.NaN(), 27000},
		"kit-ro": {44000, 44500, 44200}, "nbds-ro": {33000, 32000, 34000}, "ceil": {263000, 264000, 262000}}
	for _, k := range with(readerKeys, "ceil") {
		for r, v := range rr[k] {
			add("rr", k, fmt.Sprint(r+1), v, 4.5+0.1*float64(r), 4.6)
		}
	}
	res.errors = append(res.errors, "rr qemu-nbd failed (round 2): fio ...\n  exit status 1: nbd_connect_uri: Connection refused")
	for r := 1; r <= 3; r++ {
		for i, k := range with(writerKeys, "ceil") {
			add("rw", k, fmt.Sprint(r), []float64{62000, 24000, 67000, 37000, 350000}[i]+float64(r*100), 4.8, 5.0)
		}
		add("rr-ovl", "bf-pers", fmt.Sprint(r), 51000+float64(r), 4.6, 4.9)
		for i, k := range with(dwriterKeys, "ceil") {
			add("rwd", k, fmt.Sprint(r), []float64{56000, 21000, 49000, 40000, 112000}[i]-float64(r*1000), 4.8, 4.9)
		}
		for i, k := range dwriterKeys {
			v := []float64{math.NaN(), 12000, 15800, 15400}[i]
			add("rwd-read", k, fmt.Sprint(r), v, 6.5, 2.1)
		}
	}
	small := map[string]float64{"bf-sm": 370, "qemu-sm": 290, "kit-sm": 360, "nbds-sm": 300, "ceil-sm": 2000}
	for _, n := range readerCounts {
		c := fmt.Sprintf("readers%d", n)
		for r := 1; r <= 2; r++ {
			reps := 1
			if n == 1 {
				reps = 2
			}
			for i := 1; i <= reps; i++ {
				for _, k := range with(smallKeys, "ceil-sm") {
					j := float64(r*reps + i)
					res.samples = append(res.samples, sample{Case: c, Key: k, Round: fmt.Sprintf("%d.%d", r, i),
						Value: small[k] * (1 + float64(n)/100) * (1 + 0.03*j), ServerCPU: 0.1 * float64(n) * (1 + 0.01*j), ClientCPU: 0.35 * float64(n), DiskMiB: 128 + j})
				}
			}
		}
	}
	res.cmds["readers/ceil-sm"] = "50 x dd if=/var/tmp/bf-nbdbench.x/data/images/sha256/131c of=/dev/null bs=256k (at once)"
	res.cmds["readers/bf-sm"] = "50 x nbdcopy --connections=1 nbd://127.0.0.1:10819/<machine i's export> null: (at once)"
	multi := map[string]string{}
	for _, k := range readerKeys {
		multi[k] = "true"
	}
	return report{
		o:       o,
		host:    harness.Host{Date: "2026-11-26 02:00 UTC", CPUs: 2, CPU: "AMD EPYC", Kernel: "6.18.44", Load: "0.92 7.44 15.00", Version: "42ac115"},
		written: time.Date(2026, 11, 26, 2, 31, 7, 0, time.UTC), elapsed: 1867 * time.Second, loadAfter: "34.79 27.99 18.52",
		tools: "qemu-nbd 7.2.22; nbdkit 1.32.5; nbd-server 3.24; fio-3.33; nbdcopy 1.14.2",
		dev:   "vda", fstype: "ext4", dirty: [2]string{"10", "20"}, pageReporting: true, work: work,
		res: res, uris: uris, multi: multi,
		srvCmds: map[string]string{"bf": "bin/bootfleet serve -c bootfleet.yaml", "qemu": "qemu-nbd -p 10811 " + work + "/disk.img",
			"kit": "nbdkit -p 10813 file file=" + work + "/disk.img", "nbds": "nbd-server -C nbd-server.conf"},
	}
}

// TestReport renders fixed results and compares with
// testdata/report.golden.md; UPDATE_TESTDATA=1 rewrites it. The lines
// checked below hold whatever the golden file says.
func TestReport(t *testing.T) {
	got := render(fixture())
	path := filepath.Join("testdata", "report.golden.md")
	harness.Golden(t, path, got)
	for _, line := range []struct{ name, want string }{
		// 6 of 6 runs won: p = 2/64. The median ratio is the mean of the
		// middle two ratios.
		{"sign test, every run won", "- bootfleet, overlay: none: 1055 MB/s against nbdkit file (844 MB/s): **ahead** by 25%; round by round, the median ratio is 125%; ahead in 6 of 6 paired runs (sign test p = 0.031)."},
		{"sign test, a tie", "- bootfleet, overlay: none: 45000 IOPS against nbdkit file (44200 IOPS): **ahead** by 2%; round by round, the median ratio is 102%; ahead in 2 of 3 paired runs (sign test p = 1.00: not told apart from a tie)."},
		{"bootfleet failed", "4 KiB random write to the disk right after a cold read of the whole export, queue depth 32:\n- bootfleet, overlay: persistent: failed.\n"},
		// Even count: the median of 2 runs is their mean; a failed run is
		// left out of the median and listed in the runs.
		{"failed run", "| qemu-nbd | 26000 IOPS | 263000 IOPS | 59% | 35.4 us/op | 35.4 us/op, 92% of a CPU | 25000, failed, 27000 |"},
		// Client CPU 0.73 to 0.78 s: the mean of the middle two, 0.755 s,
		// is 1.41 s/GB; the lower middle value would give 1.40.
		{"CPU per GB, mean of the middle two", "| bootfleet, overlay: none | 1055 MB/s | 6119 MB/s | 125% | 0.47 s/GB | 1.41 s/GB |"},
		{"readers", "| 10 | bootfleet, overlay: ephemeral | 438 MB/s | 2365 MB/s | 103% | 130 MiB | 0.76 s/GB | 2.61 s/GB | 431, 444 |"},
		{"disk summary", "Disk reads with 1, 10, 50 readers (MiB, median): bootfleet, overlay: ephemeral: 132 130 130; qemu-nbd: 132 130 130;"},
		{"ceiling command", "(`n x dd if=/var/tmp/bf-nbdbench.x/data/images/sha256/131c of=/dev/null bs=256k (at once)`,"},
		{"work directory hidden", "(`nbdcopy $WORK/disk.img null:`)"},
		{"no overlay peer", "| bootfleet, overlay: persistent | 51002 IOPS | 263000 IOPS | - |"},
		{"errors", "## Errors\n\n```\nrr qemu-nbd failed (round 2): fio ...\n  exit status 1: nbd_connect_uri: Connection refused\n```\n"},
	} {
		t.Run(line.name, func(t *testing.T) {
			if !strings.Contains(got, line.want) {
				t.Errorf("report lacks\n%s", line.want)
			}
		})
	}
	if strings.Contains(got, "/dev/shm/bf-nbdbench.abc123") {
		t.Error("report names the tmpfs work directory; want $WORK")
	}
}
