package wol

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

var pc = net.HardwareAddr{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}

// The golden files were written byte by byte from the white paper's
// layout, not by Encode; UPDATE_TESTDATA=1 rewrites them from Encode.
func TestEncodeGolden(t *testing.T) {
	for _, tt := range []struct {
		file     string
		password []byte
	}{
		{"magic-525400123456.bin", nil},
		{"magic-525400123456-secureon.bin", []byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66}},
	} {
		got, err := Encode(pc, tt.password)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tt.file)
		if os.Getenv("UPDATE_TESTDATA") != "" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Encode(%s, %x) =\n%x\nwant %s:\n%x", pc, tt.password, got, tt.file, want)
		}
		p, err := Decode(want)
		if err != nil || p.MAC.String() != pc.String() || !bytes.Equal(p.Password, tt.password) {
			t.Errorf("Decode(%s) = %+v, %v; want %s with password %x", tt.file, p, err, pc, tt.password)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	if _, err := Encode(pc[:5], nil); !errors.Is(err, ErrMAC) {
		t.Errorf("Encode of a 5-byte MAC: %v, want ErrMAC", err)
	}
	if _, err := Encode(pc, []byte{1, 2, 3}); !errors.Is(err, ErrPassword) {
		t.Errorf("Encode with a 3-byte password: %v, want ErrPassword", err)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good, _ := Encode(pc, nil)
	other := bytes.Clone(good)
	copy(other[Size-6:], []byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x57})
	nosync := bytes.Clone(good)
	nosync[3] = 0xfe
	for _, tt := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrSize},
		{"one short", good[:Size-1], ErrSize},
		{"five byte password", append(bytes.Clone(good), 1, 2, 3, 4, 5), ErrSize},
		{"sync", nosync, ErrSync},
		{"last copy differs", other, ErrRepeat},
	} {
		if _, err := Decode(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: Decode = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// FuzzDecode: whatever Decode accepts, Encode gives back byte for byte,
// so the listener that stands in for a NIC accepts only real packets.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(p.MAC, p.Password)
		if err != nil {
			t.Fatalf("Encode of decoded %+v: %v", p, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("Decode then Encode changed the packet:\n%x\n%x", b, again)
		}
	})
}
