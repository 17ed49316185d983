package agent

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/bootfleet/bootfleet/internal/nbd"
)

func TestGenlMessageLayout(t *testing.T) {
	msg := genlMessage(0x1234, nlmFRequest|nlmFAck, 9, nbdCmdConnect, nbdFamilyVer,
		attrU32(nbdAttrIndex, 0),
		attrString(ctrlAttrFamilyName, "nbd"), // 4 bytes of data: no padding
		attr{typ: 99, data: []byte{1}},        // 1 byte: padded to 4
		attrNested(nbdAttrSockets, attrNested(nbdSockItem, attrU32(nbdSockFD, 3))))
	want := []byte{}
	le := binary.NativeEndian
	want = le.AppendUint32(want, 0) // length, patched below
	want = le.AppendUint16(want, 0x1234)
	want = le.AppendUint16(want, nlmFRequest|nlmFAck)
	want = le.AppendUint32(want, 9)
	want = le.AppendUint32(want, 0)
	want = append(want, nbdCmdConnect, nbdFamilyVer, 0, 0)
	want = append(le.AppendUint16(le.AppendUint16(want, 8), nbdAttrIndex), 0, 0, 0, 0)
	want = append(le.AppendUint16(le.AppendUint16(want, 8), ctrlAttrFamilyName), 'n', 'b', 'd', 0)
	want = append(le.AppendUint16(le.AppendUint16(want, 5), 99), 1, 0, 0, 0)
	want = le.AppendUint16(le.AppendUint16(want, 16), nbdAttrSockets|nlaFNested)
	want = le.AppendUint16(le.AppendUint16(want, 12), nbdSockItem|nlaFNested)
	want = le.AppendUint32(le.AppendUint16(le.AppendUint16(want, 8), nbdSockFD), 3)
	le.PutUint32(want, uint32(len(want)))
	if !bytes.Equal(msg, want) {
		t.Fatalf("genlMessage:\n got %x\nwant %x", msg, want)
	}

	msgs, err := parseMessages(append(msg, msg...))
	if err != nil || len(msgs) != 2 || msgs[1].typ != 0x1234 || msgs[1].seq != 9 {
		t.Fatalf("parseMessages: %+v, %v", msgs, err)
	}
	cmd, attrs, err := genlAttrs(msgs[0].body)
	if err != nil || cmd != nbdCmdConnect {
		t.Fatalf("genlAttrs: cmd %d, %v", cmd, err)
	}
	if string(attrs[ctrlAttrFamilyName]) != "nbd\x00" || !bytes.Equal(attrs[99], []byte{1}) {
		t.Errorf("attrs = %v", attrs)
	}
	sock, _ := parseAttrs(attrs[nbdAttrSockets])
	item, _ := parseAttrs(sock[nbdSockItem])
	if fd := le.Uint32(item[nbdSockFD]); fd != 3 {
		t.Errorf("nested socket fd = %d, want 3", fd)
	}
}

func TestParseRejectsTruncated(t *testing.T) {
	msg := genlMessage(1, 0, 1, 1, 1, attrU32(1, 1))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"length beyond datagram", msg[:len(msg)-1]},
		{"length below header", append([]byte{4, 0, 0, 0}, make([]byte, 12)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseMessages(tc.b); err == nil {
				t.Error("want an error")
			}
		})
	}
	if _, err := parseAttrs([]byte{200, 0, 1, 0}); err == nil {
		t.Error("parseAttrs of an attribute longer than its buffer: want an error")
	}
	if _, err := errnoOf([]byte{1}); err == nil {
		t.Error("errnoOf of 1 byte: want an error")
	}
	if _, _, err := genlAttrs([]byte{1}); err == nil {
		t.Error("genlAttrs of 1 byte: want an error")
	}
}

func TestFamilyInfo(t *testing.T) {
	group := func(id uint32, name string) attr {
		return attrNested(1, attrU32(ctrlAttrMcastID, id), attrString(ctrlAttrMcastName, name))
	}
	full := genlMessage(genlIDCtrl, 0, 1, 1, 2,
		attrString(ctrlAttrFamilyName, "nbd"),
		attr{ctrlAttrFamilyID, binary.NativeEndian.AppendUint16(nil, 0x1b)},
		attrNested(ctrlAttrMcastGroups, group(5, "other"), group(7, nbdMcastGroup)))
	id, mc, err := familyInfo(full[nlmsgHdrLen:], nbdMcastGroup)
	if err != nil || id != 0x1b || mc != 7 {
		t.Fatalf("familyInfo = %#x, %d, %v; want 0x1b, 7", id, mc, err)
	}
	noID := genlMessage(genlIDCtrl, 0, 1, 1, 2, attrString(ctrlAttrFamilyName, "nbd"))
	if _, _, err := familyInfo(noID[nlmsgHdrLen:], nbdMcastGroup); err == nil {
		t.Error("family reply without an id: want an error")
	}
}

func TestConnectAttrs(t *testing.T) {
	e := nbd.Negotiated{Size: 64 << 20, Flags: nbd.FlagHasFlags | nbd.FlagSendFlush, MinBlock: 1}
	got, _ := parseAttrs(appendAttrs(nil, connectAttrs(0, 5, e, 30, 120)...))
	u64 := func(t uint16) uint64 { return binary.NativeEndian.Uint64(got[t]) }
	if u64(nbdAttrSize) != 64<<20 || u64(nbdAttrBlock) != 512 || u64(nbdAttrSrvFlags) != uint64(e.Flags) || u64(nbdAttrDeadConn) != 120 || u64(nbdAttrTimeout) != 30 {
		t.Errorf("connect attributes: size %d block %d flags %#x dead %d", u64(nbdAttrSize), u64(nbdAttrBlock), u64(nbdAttrSrvFlags), u64(nbdAttrDeadConn))
	}
}

func TestKernelBlockSize(t *testing.T) {
	for _, tc := range []struct{ min, want uint32 }{{0, 512}, {1, 512}, {512, 512}, {1024, 1024}, {4096, 4096}, {65536, 4096}} {
		if got := kernelBlockSize(nbd.Negotiated{MinBlock: tc.min}); got != uint64(tc.want) {
			t.Errorf("kernelBlockSize with min %d = %d, want %d", tc.min, got, tc.want)
		}
	}
}

func FuzzParseNetlink(f *testing.F) {
	f.Add(genlMessage(genlIDCtrl, 0, 1, 1, 2, attrNested(ctrlAttrMcastGroups, attrNested(1, attrU32(2, 3)))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := parseMessages(b)
		for _, m := range msgs {
			familyInfo(m.body, nbdMcastGroup)
			errnoOf(m.body)
		}
	})
}
