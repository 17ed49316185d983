package nbd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Fields of fio's terse output, version 3 (--output-format=terse), counted
// from 1 as fio's documentation does.
const (
	terseError     = 5
	terseReadIOPS  = 8
	terseWriteIOPS = 49
)

// fioResult is what a bench reads from one fio job's terse line.
type fioResult struct {
	ReadIOPS, WriteIOPS float64
}

// parseTerse reads the first job line ("3;fio-3.33;name;...") of fio's
// terse output. A job that reported an error is an error: its figures are
// not a measurement.
func parseTerse(out string) (fioResult, error) {
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "3;") {
			continue
		}
		f := strings.Split(strings.TrimSpace(line), ";")
		if len(f) < terseWriteIOPS {
			return fioResult{}, fmt.Errorf("fio terse line has %d fields, want at least %d", len(f), terseWriteIOPS)
		}
		if e := f[terseError-1]; e != "0" {
			return fioResult{}, fmt.Errorf("fio job reported error %s", e)
		}
		var r fioResult
		var err error
		if r.ReadIOPS, err = strconv.ParseFloat(f[terseReadIOPS-1], 64); err != nil {
			return fioResult{}, fmt.Errorf("fio read IOPS: %w", err)
		}
		if r.WriteIOPS, err = strconv.ParseFloat(f[terseWriteIOPS-1], 64); err != nil {
			return fioResult{}, fmt.Errorf("fio write IOPS: %w", err)
		}
		return r, nil
	}
	return fioResult{}, errors.New("no terse job line (3;...) in fio's output")
}

// iops is the figure of a case: write IOPS for the write cases, read IOPS
// for the others. Zero is a failure: fio ran but moved nothing.
func (r fioResult) iops(write bool) (float64, error) {
	v := r.ReadIOPS
	if write {
		v = r.WriteIOPS
	}
	if v <= 0 {
		return 0, fmt.Errorf("fio measured %v IOPS", v)
	}
	return v, nil
}

// exportURI finds the root export in a machine's iPXE script: the kernel
// command line carries bootfleet.root=nbd:HOST:PORT:EXPORT, and clients
// want nbd://HOST:PORT/EXPORT.
func exportURI(script string) (string, error) {
	const key = "bootfleet.root=nbd:"
	for _, word := range strings.Fields(script) {
		rest, ok := strings.CutPrefix(word, key)
		if !ok {
			continue
		}
		f := strings.SplitN(rest, ":", 3)
		if len(f) != 3 || f[0] == "" || f[1] == "" || f[2] == "" {
			return "", fmt.Errorf("got %s%s, want %sHOST:PORT:EXPORT", key, rest, key)
		}
		return fmt.Sprintf("nbd://%s:%s/%s", f[0], f[1], f[2]), nil
	}
	return "", fmt.Errorf("no %s in the boot script; is the machine's profile rooted on an image?", key)
}

// multiConn is nbdinfo's can_multi_conn line ("true" or "false"): nbdcopy
// opens 4 connections when the server offers it, else 1.
func multiConn(nbdinfo string) string {
	for _, line := range strings.Split(nbdinfo, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "can_multi_conn:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// parseSize reads `nbdinfo --size`: the export's size in bytes.
func parseSize(out string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nbdinfo --size printed %q, want a byte count", strings.TrimSpace(out))
	}
	return n, nil
}

// parseDF reads `df --output=source,fstype PATH`: the device under a
// directory (the one whose statistics count the bytes the disk read) and
// its file system type.
func parseDF(out string) (dev, fstype string, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return "", "", fmt.Errorf("df printed %q, want a header and a line", out)
	}
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		return "", "", fmt.Errorf("df line %q, want SOURCE FSTYPE", lines[len(lines)-1])
	}
	src := f[0]
	if i := strings.LastIndexByte(src, '/'); i >= 0 {
		src = src[i+1:]
	}
	return src, f[1], nil
}

// sectorsRead is field 3 of /sys/class/block/DEV/stat: 512-byte sectors
// read since boot.
func sectorsRead(stat string) (int64, error) {
	f := strings.Fields(stat)
	if len(f) < 3 {
		return 0, fmt.Errorf("block stat %q has %d fields, want at least 3", stat, len(f))
	}
	return strconv.ParseInt(f[2], 10, 64)
}
