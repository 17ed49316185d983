package nbd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bootfleet/bootfleet/bench/harness"
)

// Server keys, as the results and the report name them. Every list starts
// with bootfleet; the ceilings (ceil, ceil2, ceil-sm) are not servers.
var (
	readerKeys  = []string{"bf-none", "bf-pers", "qemu-ro", "kit-ro", "nbds-ro"}
	writerKeys  = []string{"bf-pers", "qemu-rw", "kit-rw", "nbds-rw"}
	dwriterKeys = []string{"bf-disk", "qemu-rwd", "kit-rwd", "nbds-rwd"}
	smallKeys   = []string{"bf-sm", "qemu-sm", "kit-sm", "nbds-sm"}
)

// names are what the report calls each key.
var names = map[string]string{
	"bf-none": "bootfleet, overlay: none", "bf-pers": "bootfleet, overlay: persistent",
	"bf-disk": "bootfleet, overlay: persistent", "bf-sm": "bootfleet, overlay: ephemeral",
	"qemu-ro": "qemu-nbd", "qemu-rw": "qemu-nbd", "qemu-rwd": "qemu-nbd", "qemu-sm": "qemu-nbd",
	"kit-ro": "nbdkit file", "kit-rw": "nbdkit file", "kit-rwd": "nbdkit file", "kit-sm": "nbdkit file",
	"nbds-ro": "nbd-server", "nbds-rw": "nbd-server", "nbds-rwd": "nbd-server", "nbds-sm": "nbd-server",
	"ceil": "ceiling", "ceil2": "ceiling", "ceil-sm": "ceiling",
}

func isBootfleet(key string) bool { return strings.HasPrefix(key, "bf-") }

// server is one export under test and the process whose CPU it costs.
type server struct {
	uri string
	// cpu is the server's CPU seconds so far (every export of one process
	// shares it).
	cpu func() float64
	// settle waits until what the last run started has ended: nbd-server's
	// per-connection children, which count once they exit.
	settle func()
}

// bed is the test bed: files, servers and exports, and what the runs
// recorded.
type bed struct {
	o          options
	log        *slog.Logger
	work, disk string // tmpfs and disk directories, deleted at the end
	img, dimg  string // the 512 MiB image on tmpfs, its copy on the disk
	small      string // the 128 MiB image: bootfleet's stored copy on the disk
	dev        string // the block device under disk
	fstype     string
	servers    map[string]*server
	bfReaders  []string // lab machine i+1's export
	bfs        []*bootfleet
	procs      []*harness.Proc
	nbds       *daemon
	multi      map[string]string
	srvCmds    map[string]string // bf, qemu, kit, nbds: how each was started
	res        results
}

func (b *bed) close() {
	for _, p := range b.procs {
		p.Stop()
	}
	b.nbds.stop()
	for _, d := range []string{b.work, b.disk} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
}

// setup writes the images, starts every server and checks every export.
func (b *bed) setup(ctx context.Context) error {
	var err error
	if b.work, err = os.MkdirTemp("/dev/shm", "bf-nbdbench."); err != nil {
		return err
	}
	b.img = filepath.Join(b.work, "disk.img")
	b.log.Info("image: 512 MiB of random data on /dev/shm")
	if err := randomFile(b.img, imgBytes); err != nil {
		return err
	}
	// The concurrent-readers case reads from the real disk.
	if b.disk, err = os.MkdirTemp("/var/tmp", "bf-nbdbench."); err != nil {
		return err
	}
	small := filepath.Join(b.disk, "small.img")
	if err := randomFile(small, smallBytes); err != nil {
		return err
	}
	out, err := harness.Output(ctx, "df", "--output=source,fstype", b.disk)
	if err != nil {
		return err
	}
	if b.dev, b.fstype, err = parseDF(out); err != nil {
		return err
	}
	if _, err := b.sectors(); err != nil {
		return fmt.Errorf("no block statistics for %s (the disk under %s): %w", b.dev, b.disk, err)
	}
	if err := b.startBootfleets(ctx, small); err != nil {
		return err
	}
	if err := b.startPeers(); err != nil {
		return err
	}
	return b.checkExports(ctx)
}

// startBootfleets starts two servers: one on tmpfs with two machines whose
// profiles root the image with overlay none and persistent, and one with
// its data directory on the disk, one persistent machine and one machine
// per concurrent reader.
func (b *bed) startBootfleets(ctx context.Context, small string) error {
	bin := absBinary(b.o.bootfleet)
	kernel, ipxe, err := standIns(b.work)
	if err != nil {
		return err
	}
	cfg := bfConfig{data: filepath.Join(b.work, "data"), ipxe: ipxe, httpPort: 8080, nbdPort: 10809,
		profiles: []profile{{"ro", kernel, "bench", "none"}, {"rw", kernel, "bench", "persistent"}},
		machines: []machine{{"52:54:00:bf:00:01", "bench-none", "ro"}, {"52:54:00:bf:00:02", "bench-persistent", "rw"}}}
	bf, err := b.startBootfleet(ctx, "nbd-bootfleet", bin, "bootfleet.yaml", "bf.log", cfg, "bench", b.img)
	if err != nil {
		return err
	}
	disk := bfConfig{data: filepath.Join(b.disk, "data"), ipxe: ipxe, httpPort: 8081, nbdPort: 10819,
		profiles: []profile{{"lab", kernel, "small", "ephemeral"}, {"rw", kernel, "bench", "persistent"}},
		machines: []machine{{"52:54:00:bf:00:03", "bench-disk", "rw"}}}
	for i := 1; i <= readersMax; i++ {
		disk.machines = append(disk.machines, machine{fmt.Sprintf("52:54:00:bf:01:%02x", i), fmt.Sprintf("lab-%02d", i), "lab"})
	}
	bf2, err := b.startBootfleet(ctx, "nbd-bootfleet-disk", bin, "bootfleet-disk.yaml", "bf2.log", disk, "small", small)
	if err != nil {
		return err
	}
	// The disk-write case: the big image on the disk too, as the second
	// server's image and as the file the peers write.
	b.dimg = filepath.Join(b.disk, "disk.img")
	if _, err := harness.CopyFile(b.dimg, b.img); err != nil {
		return err
	}
	if err := bf2.importImage(ctx, "bench", b.dimg, filepath.Join(b.work, "bf2.log.import")); err != nil {
		return err
	}
	// Every server of the readers case reads one file, bootfleet's stored
	// copy, which the peers serve read-only. On this VM a cold read costs
	// several times more when the disk's host has not read the file lately;
	// with a file per server, bootfleet alone read its own and paid that
	// alone.
	if b.small, err = findFile(disk.data, smallBytes, ""); err != nil {
		return fmt.Errorf("bootfleet's stored copy of the small image: %w", err)
	}
	if err := sameFiles(b.small, small); err != nil {
		return err
	}
	_ = os.Remove(small)

	b.servers = map[string]*server{}
	exports := []struct{ key, mac string }{{"bf-none", "52:54:00:bf:00:01"}, {"bf-pers", "52:54:00:bf:00:02"}}
	for _, e := range exports {
		if err := b.addExport(bf, e.key, e.mac); err != nil {
			return err
		}
	}
	if err := b.addExport(bf2, "bf-disk", "52:54:00:bf:00:03"); err != nil {
		return err
	}
	// bootfleet's readers are machines, each with its own export.
	for i := 1; i <= readersMax; i++ {
		uri, err := bf2.export(fmt.Sprintf("52:54:00:bf:01:%02x", i))
		if err != nil {
			return err
		}
		b.bfReaders = append(b.bfReaders, uri)
	}
	b.servers["bf-sm"] = &server{uri: b.bfReaders[0], cpu: bf2.proc.CPU, settle: func() {}}
	b.srvCmds["bf"] = b.o.bootfleet + " serve -c bootfleet.yaml (nbd.listen 127.0.0.1:10809, log.level warn) + " + b.o.bootfleet +
		" image import bench disk.img; export from GET /ipxe/{mac}. On the disk: a second one, bootfleet-disk.yaml (data on /var/tmp, nbd.listen 127.0.0.1:10819)"
	return nil
}

func (b *bed) startBootfleet(ctx context.Context, name, bin, cfgFile, logFile string, cfg bfConfig, image, file string) (*bootfleet, error) {
	bf, err := startBootfleet(name, bin, filepath.Join(b.work, cfgFile), filepath.Join(b.work, logFile), nil, cfg)
	if err != nil {
		return nil, err
	}
	b.procs = append(b.procs, bf.proc)
	b.bfs = append(b.bfs, bf)
	return bf, bf.importImage(ctx, image, file, filepath.Join(b.work, logFile+".import"))
}

func (b *bed) addExport(bf *bootfleet, key, mac string) error {
	uri, err := bf.export(mac)
	if err != nil {
		return err
	}
	b.servers[key] = &server{uri: uri, cpu: bf.proc.CPU, settle: func() {}}
	return nil
}

// checkExports waits for every export, records whether it offers
// multi-conn, and compares every read-only export with its image byte for
// byte (which also warms every server's page cache path alike).
func (b *bed) checkExports(ctx context.Context) error {
	b.multi = map[string]string{}
	for _, keys := range [][]string{readerKeys, writerKeys, dwriterKeys} {
		for _, k := range keys {
			if err := b.up(ctx, k, imgBytes); err != nil {
				return err
			}
			out, err := harness.Output(ctx, "nbdinfo", b.servers[k].uri)
			if err != nil {
				return err
			}
			b.multi[k] = multiConn(out)
		}
	}
	for _, k := range readerKeys {
		if err := sameExport(ctx, b.servers[k].uri, b.img); err != nil {
			return fmt.Errorf("%s: %w", names[k], err)
		}
	}
	for _, k := range smallKeys {
		if err := b.up(ctx, k, smallBytes); err != nil {
			return err
		}
		if err := sameExport(ctx, b.servers[k].uri, b.small); err != nil {
			return fmt.Errorf("%s: %w", names[k], err)
		}
	}
	for i, uri := range b.bfReaders {
		if n, err := exportSize(ctx, uri); err != nil || n != smallBytes {
			return fmt.Errorf("machine lab-%02d's export %s does not answer with the small image's size: %d, %v", i+1, uri, n, err)
		}
	}
	b.log.Info("all exports serve the image")
	return nil
}

// up waits up to 10 s until key's export answers with size bytes.
func (b *bed) up(ctx context.Context, key string, size int64) error {
	uri := b.servers[key].uri
	var n int64
	var err error
	for range 100 {
		if n, err = exportSize(ctx, uri); err == nil && n == size {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s does not serve %s within 10 s: size %d, want %d: %v (logs in %s)", names[key], uri, n, size, err, b.work)
}

func exportSize(ctx context.Context, uri string) (int64, error) {
	out, err := harness.Output(ctx, "nbdinfo", "--size", uri)
	if err != nil {
		return 0, err
	}
	return parseSize(out)
}
