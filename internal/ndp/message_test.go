package ndp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"testing"
)

var clientMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0xe2, 0xe0, 0x02}

func TestParse(t *testing.T) {
	slla := []byte{OptSourceLinkLayer, 1, 0x52, 0x54, 0x00, 0xe2, 0xe0, 0x02}
	tests := []struct {
		name    string
		in      []byte
		wantErr error
		check   func(t *testing.T, m Message)
	}{
		{name: "bare solicitation", in: []byte{133, 0, 0xab, 0xcd, 0, 0, 0, 0},
			check: func(t *testing.T, m Message) {
				rs := m.(*RouterSolicitation)
				if len(rs.Options) != 0 || rs.SourceLinkLayer() != nil {
					t.Errorf("options %v", rs.Options)
				}
			}},
		{name: "solicitation with source link-layer address (iPXE)", in: append([]byte{133, 0, 0, 0, 0, 0, 0, 0}, slla...),
			check: func(t *testing.T, m Message) {
				if got := m.(*RouterSolicitation).SourceLinkLayer(); got.String() != clientMAC.String() {
					t.Errorf("mac %v, want %v", got, clientMAC)
				}
			}},
		{name: "solicitation reserved bits are ignored", in: []byte{133, 0, 0, 0, 1, 2, 3, 4},
			check: func(t *testing.T, m Message) {}},
		{name: "advertisement from a real router", in: append([]byte{134, 0, 0, 0, 64, 0xc0, 0x07, 0x08, 0, 0, 0x75, 0x30, 0, 0, 0x03, 0xe8,
			OptMTU, 1, 0, 0, 0, 0, 0x05, 0xdc}, slla...),
			check: func(t *testing.T, m Message) {
				ra := m.(*RouterAdvertisement)
				if ra.CurHopLimit != 64 || !ra.Managed || !ra.Other || ra.RouterLifetime != 1800 ||
					ra.ReachableTime != 30000 || ra.RetransTimer != 1000 {
					t.Errorf("got %+v", ra)
				}
				if len(ra.Options) != 2 || ra.Options[0].Type != OptMTU || ra.SourceLinkLayer().String() != clientMAC.String() {
					t.Errorf("options %+v", ra.Options)
				}
			}},
		{name: "empty", in: nil, wantErr: ErrShort},
		{name: "truncated solicitation", in: []byte{133, 0, 0, 0, 0}, wantErr: ErrShort},
		{name: "truncated advertisement", in: []byte{134, 0, 0, 0, 0, 0, 0, 0}, wantErr: ErrShort},
		{name: "neighbour solicitation", in: []byte{135, 0, 0, 0, 0, 0, 0, 0}, wantErr: ErrType},
		{name: "echo request", in: []byte{128, 0, 0, 0, 0, 0, 0, 0}, wantErr: ErrType},
		{name: "non-zero code", in: []byte{133, 1, 0, 0, 0, 0, 0, 0}, wantErr: ErrCode},
		{name: "zero-length option", in: []byte{133, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, wantErr: ErrOption},
		{name: "option past the end", in: []byte{133, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0}, wantErr: ErrOption},
		{name: "one stray byte", in: []byte{133, 0, 0, 0, 0, 0, 0, 0, 1}, wantErr: ErrOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(tt.in)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, m)
		})
	}
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		want []byte
	}{
		{name: "our advertisement without a MAC", msg: Advertisement(nil),
			want: []byte{134, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{name: "our advertisement names our MAC", msg: Advertisement(clientMAC),
			want: []byte{134, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0x52, 0x54, 0x00, 0xe2, 0xe0, 0x02}},
		{name: "advertisement fields", msg: &RouterAdvertisement{CurHopLimit: 64, Managed: true, RouterLifetime: 1800, ReachableTime: 1, RetransTimer: 2},
			want: []byte{134, 0, 0, 0, 64, 0x80, 0x07, 0x08, 0, 0, 0, 1, 0, 0, 0, 2}},
		{name: "solicitation with MAC", msg: &RouterSolicitation{Options: []Option{SourceLinkLayerOption(clientMAC)}},
			want: []byte{133, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0x52, 0x54, 0x00, 0xe2, 0xe0, 0x02}},
		{name: "option padded to 8 bytes", msg: &RouterSolicitation{Options: []Option{{Type: 99, Data: []byte{7}}}},
			want: []byte{133, 0, 0, 0, 0, 0, 0, 0, 99, 1, 7, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.msg.Marshal()
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got  %x\nwant %x", got, tt.want)
			}
			back, err := Parse(got)
			if err != nil {
				t.Fatalf("own encoding does not parse: %v", err)
			}
			if !bytes.Equal(back.Marshal(), got) {
				t.Fatalf("round trip changed it: %x", back.Marshal())
			}
		})
	}
}

// TestAdvertisementIsHarmless pins the promises made to a sysadmin: we are
// nobody's default router, hand out no prefix and start no DHCPv6.
func TestAdvertisementIsHarmless(t *testing.T) {
	m, err := Parse(Advertisement(clientMAC).Marshal())
	if err != nil {
		t.Fatal(err)
	}
	ra := m.(*RouterAdvertisement)
	if ra.RouterLifetime != 0 || ra.Managed || ra.Other || ra.CurHopLimit != 0 || ra.ReachableTime != 0 || ra.RetransTimer != 0 {
		t.Errorf("advertisement %+v, want every field 0", ra)
	}
	for _, o := range ra.Options {
		if o.Type != OptSourceLinkLayer {
			t.Errorf("option type %d, want only the source link-layer address", o.Type)
		}
	}
}

// TestPrefixInfoOption: the option is 32 bytes, as RFC 4861 section
// 4.6.2 draws it, with the prefix masked and both lifetimes set.
func TestPrefixInfoOption(t *testing.T) {
	ra := &RouterAdvertisement{Managed: true, Other: true,
		Options: []Option{PrefixInfoOption(netip.MustParsePrefix("fd00:213::100/64"), true, true, 1800)}}
	b := ra.Marshal()
	want := []byte{OptPrefixInfo, 4, 64, 0xc0, 0, 0, 0x07, 0x08, 0, 0, 0x07, 0x08, 0, 0, 0, 0,
		0xfd, 0, 0x02, 0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b[raHeaderLen:], want) || b[5] != flagM|flagO {
		t.Fatalf("advertisement %x, want flags M and O and the option %x", b, want)
	}
	m, err := Parse(b)
	if err != nil || len(m.(*RouterAdvertisement).Options) != 1 {
		t.Fatalf("Parse: %v %+v", err, m)
	}
}
