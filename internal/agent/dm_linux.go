package agent

import (
	"bytes"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The device-mapper ioctls (linux/dm-ioctl.h) take one buffer: a
// struct dm_ioctl header, then at Data_start the command's payload. The
// agent speaks them itself so the initramfs needs no dmsetup.

const (
	dmHeaderLen = int(unsafe.Sizeof(unix.DmIoctl{}))
	dmSpecLen   = int(unsafe.Sizeof(unix.DmTargetSpec{}))
	dmControl   = "/dev/mapper/control"
)

// dmBuffer is an ioctl buffer of size bytes whose header names the device
// and asks for interface version 4 (any 4.x kernel accepts 4.0.0).
func dmBuffer(name string, size int) ([]byte, *unix.DmIoctl) {
	// uint64 backing keeps the header 8-byte aligned, as the kernel wants.
	words := make([]uint64, (size+7)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	h := (*unix.DmIoctl)(unsafe.Pointer(&words[0]))
	h.Version = [3]uint32{4, 0, 0}
	h.Data_size = uint32(len(buf))
	h.Data_start = uint32(dmHeaderLen)
	copy(h.Name[:len(h.Name)-1], name)
	return buf, h
}

// dmTableBuffer is the DM_TABLE_LOAD buffer of a one-target table.
func dmTableBuffer(name string, sectors int64, target, params string) []byte {
	specLen := (dmSpecLen + len(params) + 1 + 7) &^ 7
	buf, h := dmBuffer(name, dmHeaderLen+specLen)
	h.Target_count = 1
	spec := (*unix.DmTargetSpec)(unsafe.Pointer(&buf[dmHeaderLen]))
	spec.Length = uint64(sectors)
	spec.Next = uint32(specLen)
	copy(spec.Target_type[:len(spec.Target_type)-1], target)
	copy(buf[dmHeaderLen+dmSpecLen:], params)
	return buf
}

// dmStatus reads the status line of name's first target from a
// DM_TABLE_STATUS reply.
func dmStatusLine(buf []byte) (string, error) {
	h := (*unix.DmIoctl)(unsafe.Pointer(&buf[0]))
	if h.Flags&unix.DM_BUFFER_FULL_FLAG != 0 {
		return "", fmt.Errorf("device-mapper status does not fit in %d bytes", len(buf))
	}
	start := int(h.Data_start)
	if h.Target_count == 0 || start+dmSpecLen > len(buf) {
		return "", fmt.Errorf("device-mapper status: %d targets, want 1", h.Target_count)
	}
	line := buf[start+dmSpecLen:]
	if i := bytes.IndexByte(line, 0); i >= 0 {
		line = line[:i]
	}
	return string(line), nil
}

func dmIoctl(f *os.File, cmd uintptr, buf []byte) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), cmd, uintptr(unsafe.Pointer(&buf[0])))
	if e != 0 {
		return e
	}
	return nil
}

// dmCreate creates device name with one target and activates it, and
// returns its device node, /dev/dm-N, which devtmpfs makes.
func dmCreate(name string, sectors int64, target, params string) (string, error) {
	ctl, err := os.OpenFile(dmControl, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open %s (is dm_mod loaded?): %w", dmControl, err)
	}
	defer ctl.Close()
	buf, h := dmBuffer(name, dmHeaderLen)
	if err := dmIoctl(ctl, unix.DM_DEV_CREATE, buf); err != nil {
		return "", fmt.Errorf("DM_DEV_CREATE %s: %w", name, err)
	}
	dev := fmt.Sprintf("/dev/dm-%d", unix.Minor(h.Dev))
	remove := func() {
		b, _ := dmBuffer(name, dmHeaderLen)
		dmIoctl(ctl, unix.DM_DEV_REMOVE, b)
	}
	if err := dmIoctl(ctl, unix.DM_TABLE_LOAD, dmTableBuffer(name, sectors, target, params)); err != nil {
		remove()
		return "", fmt.Errorf("DM_TABLE_LOAD %s (the kernel log says why): %w", target, err)
	}
	buf, _ = dmBuffer(name, dmHeaderLen) // DM_DEV_SUSPEND without DM_SUSPEND_FLAG resumes
	if err := dmIoctl(ctl, unix.DM_DEV_SUSPEND, buf); err != nil {
		remove()
		return "", fmt.Errorf("resume %s: %w", name, err)
	}
	deadline := time.Now().Add(deviceWaitMax)
	for {
		if _, err := os.Stat(dev); err == nil {
			return dev, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s did not appear in %v", dev, deviceWaitMax)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dmStatus is the status line of device name's target; ctl is an open
// /dev/mapper/control.
func dmStatus(ctl *os.File, name string) (string, error) {
	buf, _ := dmBuffer(name, 16<<10)
	if err := dmIoctl(ctl, unix.DM_TABLE_STATUS, buf); err != nil {
		return "", fmt.Errorf("DM_TABLE_STATUS %s: %w", name, err)
	}
	return dmStatusLine(buf)
}
