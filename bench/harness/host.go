package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Host is what a reader needs to judge a report's numbers.
type Host struct {
	Date    string // UTC, when the run started
	CPUs    int
	CPU     string // model name
	Kernel  string
	Load    string // load average when described
	Version string // git describe of the tree measured
}

// DescribeHost reads the machine and the tree's version. It is taken before
// the report is written, so that rewriting a tracked report does not make a
// clean tree look dirty.
func DescribeHost(ctx context.Context) Host {
	h := Host{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), CPUs: runtime.NumCPU(),
		CPU: CPUModel(), Load: LoadAvg(), Version: FirstLine(ctx, "git", "describe", "--always", "--dirty")}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	return h
}

// String is the one line a report opens with.
func (h Host) String() string {
	return fmt.Sprintf("%s, bootfleet %s, %d CPUs (%s), Linux %s, load average %s",
		h.Date, h.Version, h.CPUs, h.CPU, h.Kernel, h.Load)
}

// CPUModel is the first model name in /proc/cpuinfo.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// LoadAvg is the 1, 5 and 15 minute load averages.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// FirstLine runs a command (a tool's --version, usually) and returns the
// first line of what it printed, or "unknown".
func FirstLine(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// FSType names the file system under path, and says when it is RAM, where
// fsync is free and durable servers look better than they are.
func FSType(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs (RAM: fsync is free here, the numbers flatter durable servers)"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4 (disk)"
	case unix.XFS_SUPER_MAGIC:
		return "xfs (disk)"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs (disk)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("filesystem magic %#x", st.Type)
}

// CopyFile copies src to dst (created or truncated) and returns the bytes
// copied.
func CopyFile(dst, src string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
