package tftp

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestParsePacket(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Packet
		wantErr error
	}{
		{"RRQ", "\x00\x01pxelinux.0\x00octet\x00", &Request{Op: OpRRQ, Filename: "pxelinux.0", Mode: "octet"}, nil},
		{"WRQ", "\x00\x02f\x00netascii\x00", &Request{Op: OpWRQ, Filename: "f", Mode: "netascii"}, nil},
		{"RRQ options", "\x00\x01f\x00octet\x00blksize\x001456\x00tsize\x000\x00",
			&Request{Op: OpRRQ, Filename: "f", Mode: "octet", Options: []Option{{"blksize", "1456"}, {"tsize", "0"}}}, nil},
		{"RRQ NUL padding", "\x00\x01f\x00octet\x00\x00\x00\x00", &Request{Op: OpRRQ, Filename: "f", Mode: "octet"}, nil},
		{"RRQ empty option value", "\x00\x01f\x00octet\x00multicast\x00\x00",
			&Request{Op: OpRRQ, Filename: "f", Mode: "octet", Options: []Option{{"multicast", ""}}}, nil},
		{"RRQ no filename NUL", "\x00\x01pxelinux.0", nil, ErrMalformed},
		{"RRQ empty filename", "\x00\x01\x00octet\x00", nil, ErrMalformed},
		{"RRQ no mode", "\x00\x01f\x00", nil, ErrMalformed},
		{"RRQ mode not terminated", "\x00\x01f\x00octet", nil, ErrMalformed},
		{"RRQ empty mode", "\x00\x01f\x00\x00", nil, ErrMalformed},
		{"RRQ option without value", "\x00\x01f\x00octet\x00blksize\x00", nil, ErrMalformed},
		{"RRQ option value unterminated", "\x00\x01f\x00octet\x00blksize\x001456", nil, ErrMalformed},
		{"RRQ empty option name", "\x00\x01f\x00octet\x00\x00x\x00", nil, ErrMalformed},
		{"DATA", "\x00\x03\x12\x34abc", &Data{Block: 0x1234, Payload: []byte("abc")}, nil},
		{"DATA empty", "\x00\x03\xff\xff", &Data{Block: 0xffff, Payload: []byte{}}, nil},
		{"DATA short", "\x00\x03\x01", nil, ErrShortPacket},
		{"ACK", "\x00\x04\x00\x07", &Ack{Block: 7}, nil},
		{"ACK trailing bytes", "\x00\x04\x00\x07\x00", &Ack{Block: 7}, nil},
		{"ACK short", "\x00\x04\x00", nil, ErrShortPacket},
		{"ERROR", "\x00\x05\x00\x01File not found\x00", &Error{Code: 1, Message: "File not found"}, nil},
		{"ERROR unterminated", "\x00\x05\x00\x08no", &Error{Code: 8, Message: "no"}, nil},
		{"ERROR short", "\x00\x05\x00", nil, ErrShortPacket},
		{"OACK", "\x00\x06blksize\x001456\x00", &OAck{Options: []Option{{"blksize", "1456"}}}, nil},
		{"OACK empty", "\x00\x06", &OAck{}, nil},
		{"empty", "", nil, ErrShortPacket},
		{"one byte", "\x00", nil, ErrShortPacket},
		{"opcode 0", "\x00\x00abc", nil, ErrUnknownOpcode},
		{"opcode 7", "\x00\x07", nil, ErrUnknownOpcode},
		{"opcode 256", "\x01\x01f\x00octet\x00", nil, ErrUnknownOpcode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePacket([]byte(tt.in))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ParsePacket(%q) = %v, %v; want error %v", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePacket(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParsePacket(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppend(t *testing.T) {
	tests := []struct {
		p    Packet
		want string
	}{
		{&Request{Op: OpRRQ, Filename: "f", Mode: "octet", Options: []Option{{"tsize", "0"}}}, "\x00\x01f\x00octet\x00tsize\x000\x00"},
		{&Data{Block: 258, Payload: []byte("xy")}, "\x00\x03\x01\x02xy"},
		{&Ack{Block: 65535}, "\x00\x04\xff\xff"},
		{&Error{Code: ErrCodeAccessViolation, Message: "no"}, "\x00\x05\x00\x02no\x00"},
		{&Error{Code: 0, Message: "a\x00b"}, "\x00\x05\x00\x00ab\x00"}, // NUL cannot break framing
		{&OAck{Options: []Option{{"blksize", "1468"}, {"windowsize", "64"}}}, "\x00\x06blksize\x001468\x00windowsize\x0064\x00"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v", tt.p.Opcode()), func(t *testing.T) {
			if got := tt.p.Append(nil); string(got) != tt.want {
				t.Fatalf("Append = %q, want %q", got, tt.want)
			}
		})
	}
	b := make([]byte, 4)
	putDataHeader(b, 0xabcd)
	if !bytes.Equal(b, []byte{0, 3, 0xab, 0xcd}) {
		t.Fatalf("putDataHeader = %x", b)
	}
}

// FuzzParsePacket: decoding never panics, and whatever decodes re-encodes to
// bytes that decode to the same packet.
func FuzzParsePacket(f *testing.F) {
	f.Add([]byte("\x00\x01pxelinux.0\x00octet\x00blksize\x001456\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePacket(b)
		if err != nil {
			if p != nil {
				t.Fatalf("packet %#v returned with error %v", p, err)
			}
			return
		}
		again, err := ParsePacket(p.Append(nil))
		if err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", p, err)
		}
		if d, ok := p.(*Data); ok && len(d.Payload) == 0 {
			d.Payload = []byte{}
			again.(*Data).Payload = []byte{}
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("round trip changed %#v into %#v", p, again)
		}
	})
}

// FuzzParseOptions: parsing never panics, and re-encoding round-trips.
func FuzzParseOptions(f *testing.F) {
	f.Add([]byte("blksize\x001456\x00windowsize\x0064\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		opts, err := ParseOptions(b)
		if err != nil {
			return
		}
		for _, o := range opts {
			if o.Name == "" {
				t.Fatalf("empty option name accepted from %q", b)
			}
		}
		again, err := ParseOptions(AppendOptions(nil, opts))
		if err != nil || !reflect.DeepEqual(opts, again) {
			t.Fatalf("round trip of %q: %v, %v", opts, again, err)
		}
		// negotiate must not panic on anything the codec accepts.
		negotiate(opts, 12345, limits{maxBlockSize: 1468, maxWindow: 64})
	})
}
