package harness

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

// clockTick is USER_HZ, which Linux fixes at 100 on every architecture the
// benches run on.
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

// processTree maps every living process to its children and its CPU seconds.
func processTree() (children map[int][]int, cpu map[int]float64) {
	children, cpu = map[int][]int{}, map[int]float64{}
	ents, _ := filepath.Glob("/proc/[0-9]*")
	for _, e := range ents {
		pid, err := strconv.Atoi(filepath.Base(e))
		if err != nil {
			continue
		}
		if ppid, c, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], pid)
			cpu[pid] = c
		}
	}
	return children, cpu
}

// Descendants lists root's living descendants.
func Descendants(root int) []int {
	children, _ := processTree()
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// TreeCPU sums the CPU seconds of root and its living descendants. Reaped
// children are already in their parent's cutime and cstime.
func TreeCPU(root int) float64 {
	children, cpu := processTree()
	total := 0.0
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		total += cpu[queue[0]]
		queue = append(queue, children[queue[0]]...)
	}
	return total
}

// peakRSS is pid's VmHWM in bytes, 0 when unreadable.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// SchedCPU is the CPU time of all of pid's threads from schedstat, in
// nanoseconds rather than the 10 ms ticks of /proc/PID/stat.
func SchedCPU(pid int) time.Duration {
	return time.Duration(schedstat(pid, 0))
}

// SchedRuns is how many times any of pid's threads was put on a CPU: its
// wakeups, near enough, which on a virtual machine cost more than the
// system calls between them.
func SchedRuns(pid int) int64 { return schedstat(pid, 2) }

// schedstat sums field i of /proc/PID/task/*/schedstat (0: ns on a CPU,
// 1: ns waiting for one, 2: times run).
func schedstat(pid, i int) int64 {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) > i {
			v, _ := strconv.ParseInt(fs[i], 10, 64)
			sum += v
		}
	}
	return sum
}

// SelfCPU is the calling process's own CPU seconds (a bench hashing its
// downloads, mostly).
func SelfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// ChildrenCPU is the CPU seconds of the calling process's reaped children:
// the client tools a bench ran and waited for.
func ChildrenCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// MachineCPU returns busy, total and irq+softirq jiffies from /proc/stat,
// all CPUs. irq+softirq is mostly packet processing, charged to no process.
func MachineCPU() (busy, total, irq float64) {
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

// OtherLoad samples the machine's busy fraction over d: other work (VMs,
// builds) takes CPU from every figure, and a report says how much there was.
func OtherLoad(d time.Duration) float64 {
	busy0, total0, _ := MachineCPU()
	time.Sleep(d)
	busy1, total1, _ := MachineCPU()
	if total1 <= total0 {
		return 0
	}
	return (busy1 - busy0) / (total1 - total0)
}

// Cgroup is a cgroup v2 leaf holding one server and everything it forks.
// A nil *Cgroup is valid and counts nothing.
type Cgroup struct{ dir string }

// NewCgroup creates the leaf bf-bench-NAME under the first cgroup2 mount
// and moves pid into it; nil (fall back to /proc accounting) when that is
// not possible.
func NewCgroup(name string, pid int) *Cgroup {
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
		return &Cgroup{dir: dir}
	}
	return nil
}

// Adopt moves root's descendants into c: workers a server forked at start,
// before NewCgroup moved it, would otherwise go uncounted (nginx).
func (c *Cgroup) Adopt(root int) {
	if c == nil {
		return
	}
	for _, pid := range Descendants(root) {
		_ = os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0)
	}
}

// CPU reads usage_usec from cpu.stat, which cgroup v2 keeps even without
// the cpu controller enabled.
func (c *Cgroup) CPU() (float64, bool) {
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

// Remove deletes the (by now empty) cgroup.
func (c *Cgroup) Remove() {
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
