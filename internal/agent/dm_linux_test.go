package agent

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestDMTableBuffer checks the DM_TABLE_LOAD buffer against the layout of
// linux/dm-ioctl.h, read back field by field from the bytes.
func TestDMTableBuffer(t *testing.T) {
	const params = "43:1 1:0 N 8"
	buf := dmTableBuffer(dmName, 131072, "snapshot", params)
	if dmHeaderLen != 312 || dmSpecLen != 40 {
		t.Fatalf("struct sizes %d and %d, want 312 and 40 (linux/dm-ioctl.h)", dmHeaderLen, dmSpecLen)
	}
	le := binary.LittleEndian
	specLen := (40 + len(params) + 1 + 7) &^ 7
	for _, f := range []struct {
		what      string
		got, want uint64
	}{
		{"version major", uint64(le.Uint32(buf[0:])), 4},
		{"data_size", uint64(le.Uint32(buf[12:])), uint64(312 + specLen)},
		{"data_start", uint64(le.Uint32(buf[16:])), 312},
		{"target_count", uint64(le.Uint32(buf[20:])), 1},
		{"flags (read-write)", uint64(le.Uint32(buf[28:])), 0},
		{"sector_start", le.Uint64(buf[312:]), 0},
		{"length", le.Uint64(buf[320:]), 131072},
		{"next", uint64(le.Uint32(buf[332:])), uint64(specLen)},
		{"buffer length", uint64(len(buf)), uint64(312 + specLen)},
	} {
		if f.got != f.want {
			t.Errorf("%s = %d, want %d", f.what, f.got, f.want)
		}
	}
	if name := buf[48 : 48+len(dmName)+1]; !bytes.Equal(name, append([]byte(dmName), 0)) {
		t.Errorf("name field %q, want %q NUL-terminated", name, dmName)
	}
	if typ := buf[336 : 336+9]; !bytes.Equal(typ, []byte("snapshot\x00")) {
		t.Errorf("target type %q, want snapshot", typ)
	}
	if p := buf[352 : 352+len(params)+1]; !bytes.Equal(p, append([]byte(params), 0)) {
		t.Errorf("params %q, want %q NUL-terminated", p, params)
	}
	if uintptr(unsafe.Pointer(&buf[0]))%8 != 0 {
		t.Error("buffer is not 8-byte aligned")
	}
}

// TestDMStatusLine reads a status reply as the kernel writes it.
func TestDMStatusLine(t *testing.T) {
	buf, h := dmBuffer(dmName, 1024)
	h.Target_count = 1
	copy(buf[312+40:], "160/262144 16\x00garbage")
	if got, err := dmStatusLine(buf); err != nil || got != "160/262144 16" {
		t.Fatalf("dmStatusLine = %q, %v", got, err)
	}
	h.Flags |= unix.DM_BUFFER_FULL_FLAG
	if _, err := dmStatusLine(buf); err == nil {
		t.Fatal("a reply flagged buffer-full was read")
	}
	h.Flags, h.Target_count = 0, 0
	if _, err := dmStatusLine(buf); err == nil {
		t.Fatal("a reply with no target was read")
	}
}
