package initramfs

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
)

// Compression names how the cpio archive is compressed. Debian's kernels
// unpack gzip, xz, lz4 and zstd initramfs images (CONFIG_RD_*).
const (
	// CompressXZ is the default: the agent and the modules make up most
	// of the archive, and xz makes it about 15% smaller than gzip -9 and
	// 5% smaller than zstd -19, bytes every machine fetches at every
	// boot. It runs the xz tool (xz-utils).
	CompressXZ = "xz"
	// CompressGzip needs no tool; the fallback where xz is missing.
	CompressGzip = "gzip"
)

// xzArgs are fixed so that one xz version always writes the same bytes:
// one thread (xz 5.6 defaults to several, whose block split depends on
// the CPU count); CRC32, the only check the kernel's xz decoder is sure
// to know; and xz's default preset, whose 8 MiB dictionary the kernel
// allocates to unpack: -9e makes an initramfs under 0.1% smaller for
// half again the time.
var xzArgs = []string{"-T1", "--check=crc32", "--lzma2=preset=6,dict=8MiB", "-c"}

// compress writes cpio to out compressed as kind ("" is xz, or gzip when
// the xz tool is missing) and returns the kind it used.
func compress(out io.Writer, cpio []byte, kind string, log *slog.Logger) (string, error) {
	if kind == "" {
		kind = CompressXZ
		if _, err := exec.LookPath("xz"); err != nil {
			log.Warn("xz not installed; the initramfs is gzip'd, about 15% larger (install xz-utils)")
			kind = CompressGzip
		}
	}
	switch kind {
	case CompressGzip:
		gz, _ := gzip.NewWriterLevel(out, gzip.BestCompression) // no name, zero time: reproducible
		if _, err := gz.Write(cpio); err != nil {
			return "", err
		}
		return kind, gz.Close()
	case CompressXZ:
		cmd := exec.Command("xz", xzArgs...)
		var stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(cpio), out, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("compress the initramfs with xz (install xz-utils, or choose gzip): %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		return kind, nil
	}
	return "", fmt.Errorf("initramfs compression %q: want xz or gzip", kind)
}
