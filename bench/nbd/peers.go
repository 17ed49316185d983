package nbd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// startPeers starts qemu-nbd and nbdkit (a read-only and a writable
// instance on the tmpfs image, a read-only one on the small image, a
// writable one on the disk copy) and nbd-server with one export of each,
// all with their packaged defaults. The read-only qemu-nbd opts out of the
// image lock so that both instances can open the file.
func (b *bed) startPeers() error {
	peers := []struct {
		key, port string
		argv      []string
		path      string
	}{
		{"qemu-ro", "10811", qemuArgs("10811", b.img, true), "/disk"},
		{"qemu-rw", "10812", qemuArgs("10812", b.img, false), "/disk"},
		{"kit-ro", "10813", nbdkitArgs("10813", b.img, true), ""},
		{"kit-rw", "10814", nbdkitArgs("10814", b.img, false), ""},
		{"qemu-sm", "10821", qemuArgs("10821", b.small, true), "/disk"},
		{"kit-sm", "10823", nbdkitArgs("10823", b.small, true), ""},
		{"qemu-rwd", "10832", qemuArgs("10832", b.dimg, false), "/disk"},
		{"kit-rwd", "10834", nbdkitArgs("10834", b.dimg, false), ""},
	}
	var qemu, kit []string
	for _, p := range peers {
		proc, err := harness.Start("nbd-"+p.key, "", filepath.Join(b.work, p.key+".log"), nil, p.argv...)
		if err != nil {
			return err
		}
		b.procs = append(b.procs, proc)
		b.servers[p.key] = &server{uri: "nbd://127.0.0.1:" + p.port + p.path, cpu: proc.CPU, settle: func() {}}
		if strings.HasPrefix(p.key, "qemu") {
			qemu = append(qemu, strings.Join(p.argv, " "))
		} else {
			kit = append(kit, strings.Join(p.argv, " "))
		}
	}
	b.srvCmds["qemu"], b.srvCmds["kit"] = strings.Join(qemu, " ; "), strings.Join(kit, " ; ")

	conf := filepath.Join(b.work, "nbd-server.conf")
	body := fmt.Sprintf(`[generic]
    listenaddr = 127.0.0.1
    port = 10815
[ro]
    exportname = %s
    readonly = true
[rw]
    exportname = %s
[small]
    exportname = %s
    readonly = true
[rwdisk]
    exportname = %s
`, b.img, b.img, b.small, b.dimg)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return err
	}
	var err error
	if b.nbds, err = startDaemon("nbd-server", filepath.Join(b.work, "nbds.log"), filepath.Join(b.work, "nbd-server.pid"),
		"nbd-server", "-C", conf, "-p", filepath.Join(b.work, "nbd-server.pid")); err != nil {
		return err
	}
	for key, export := range map[string]string{"nbds-ro": "ro", "nbds-rw": "rw", "nbds-sm": "small", "nbds-rwd": "rwdisk"} {
		b.servers[key] = &server{uri: "nbd://127.0.0.1:10815/" + export, cpu: b.nbds.cpu, settle: b.nbds.settle}
	}
	b.srvCmds["nbds"] = "nbd-server -C nbd-server.conf (port 10815; export ro: readonly = true, exports rw and rwdisk: read-write; other options default)"
	return nil
}

func qemuArgs(port, file string, readOnly bool) []string {
	if readOnly {
		return []string{"qemu-nbd", "--image-opts", "-r", "-t", "-e", "0", "-b", "127.0.0.1", "-p", port, "-x", "disk",
			"driver=raw,file.driver=file,file.filename=" + file + ",file.locking=off"}
	}
	return []string{"qemu-nbd", "-f", "raw", "-t", "-e", "0", "-b", "127.0.0.1", "-p", port, "-x", "disk", file}
}

func nbdkitArgs(port, file string, readOnly bool) []string {
	argv := []string{"nbdkit", "-f"}
	if readOnly {
		argv = append(argv, "-r")
	}
	return append(argv, "-i", "127.0.0.1", "-p", port, "file", "file="+file)
}

// daemon is a server that forks into the background (nbd-server: with -d
// it would serve one client only), found by its pid file. Its cgroup holds
// the per-connection children it forks.
type daemon struct {
	pid int
	cg  *harness.Cgroup
}

func startDaemon(name, logPath, pidFile string, argv ...string) (*daemon, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w (log %s)", strings.Join(argv, " "), err, logPath)
	}
	for range 50 {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				return &daemon{pid: pid, cg: harness.NewCgroup(name, pid)}, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s wrote no pid to %s within 5 s (log %s)", name, pidFile, logPath)
}

// cpu is the daemon's CPU seconds: its cgroup's, else its own and its
// reaped children's.
func (d *daemon) cpu() float64 {
	if c, ok := d.cg.CPU(); ok {
		return c
	}
	return harness.TreeCPU(d.pid)
}

// settle waits up to 2 s until the children of the last run have exited.
func (d *daemon) settle() {
	for range 40 {
		if len(harness.Descendants(d.pid)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	if d == nil {
		return
	}
	// Children are listed first: once the daemon is gone they are orphans.
	pids := append(harness.Descendants(d.pid), d.pid)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for range 50 {
		if syscall.Kill(d.pid, 0) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	d.cg.Remove()
}
