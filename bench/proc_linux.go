package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, which Linux fixes at 100 on every architecture bench runs on.
const clockTick = 100

// procStat returns ppid and utime+stime+cutime+cstime (seconds) of pid.
func procStat(pid int) (ppid int, cpu float64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces and parentheses; fields resume after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	var ticks float64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseFloat(f[k], 64)
		ticks += v
	}
	return ppid, ticks / clockTick, true
}

// descendants lists root's living descendants.
func descendants(root int) []int {
	children := map[int][]int{}
	ents, _ := filepath.Glob("/proc/[0-9]*")
	for _, e := range ents {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := children[root]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// treeCPU sums procStat CPU over root and its living descendants. Reaped
// children are already in their parent's cutime/cstime.
func treeCPU(root int) float64 {
	children := map[int][]int{}
	cpu := map[int]float64{}
	ents, _ := filepath.Glob("/proc/[0-9]*")
	for _, e := range ents {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		ppid, c, ok := procStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		cpu[pid] = c
	}
	total, queue := 0.0, []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		total += cpu[p]
		queue = append(queue, children[p]...)
	}
	return total
}

// selfCPU is bench's own CPU seconds (hashing downloads, mostly).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// machineCPU returns busy, total and irq+softirq jiffies from /proc/stat,
// all CPUs. irq+softirq is mostly packet processing, charged to no process.
func machineCPU() (busy, total, irq float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:] {
		v, _ := strconv.ParseFloat(s, 64)
		if i >= 8 { // guest time is already in user
			break
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
		if i == 5 || i == 6 {
			irq += v
		}
	}
	return busy, total, irq
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cgroup is a cgroup v2 leaf holding one server and everything it forks.
type cgroup struct{ dir string }

// newCgroup creates a leaf under the first cgroup2 mount and moves pid into
// it; nil (and /proc accounting) when that is not possible.
func newCgroup(name string, pid int) *cgroup {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || fs[2] != "cgroup2" {
			continue
		}
		dir := filepath.Join(fs[1], "bf-bench-"+name)
		_ = os.Remove(dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
			_ = os.Remove(dir)
			return nil
		}
		return &cgroup{dir: dir}
	}
	return nil
}

// adopt moves root's descendants into c: workers a server forked at start,
// before newCgroup moved it, would otherwise go uncounted (nginx).
func (c *cgroup) adopt(root int) {
	if c == nil {
		return
	}
	for _, pid := range descendants(root) {
		_ = os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0)
	}
}

// cpu reads usage_usec from cpu.stat, which cgroup v2 keeps even without
// the cpu controller enabled.
func (c *cgroup) cpu() (float64, bool) {
	if c == nil {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n / 1e6, err == nil
		}
	}
	return 0, false
}

// remove deletes the (by now empty) cgroup.
func (c *cgroup) remove() {
	if c == nil {
		return
	}
	for range 20 {
		if os.Remove(c.dir) == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
