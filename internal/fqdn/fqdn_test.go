package fqdn

import (
	"encoding/hex"
	"errors"
	"testing"
)

var errAny = errors.New("any error")

func TestDecode(t *testing.T) {
	for _, tt := range []struct {
		name    string
		v6      bool
		hex     string
		want    Option
		wantErr error // errAny: any error
	}{
		{"v4 wire label", false, "05000003706331", Option{Flags: 5, Name: "pc1", Partial: true}, nil},
		{"v4 wire fqdn", false, "0500000370633103616263036f726700", Option{Flags: 5, Name: "pc1.abc.org"}, nil},
		{"v4 ascii", false, "000000706331", Option{Name: "pc1", Partial: true}, nil},
		{"v4 ascii full", false, "0000007063312e6f72672e", Option{Name: "pc1.org"}, nil},
		{"v4 no name", false, "010000", Option{Flags: 1}, nil},
		{"v4 short", false, "0100", Option{}, ErrShort},
		{"v4 label past end", false, "0500000370633103", Option{}, ErrName},
		{"v4 must-be-zero", false, "110000", Option{}, errAny},
		{"v4 pointer", false, "050000c00c", Option{}, ErrName},
		{"v4 ascii control", false, "0000007063310a", Option{}, ErrName},
		{"v4 label with NUL", false, "050000027000", Option{}, ErrName},
		{"v6 partial", true, "0103706331", Option{Flags: 1, Name: "pc1", Partial: true}, nil},
		{"v6 full", true, "000370633103616263036f726700", Option{Name: "pc1.abc.org"}, nil},
		{"v6 no name", true, "00", Option{}, nil},
		{"v6 nothing", true, "", Option{}, ErrShort},
		{"v6 after root", true, "0003706331000000", Option{}, ErrName},
		{"v6 must-be-zero", true, "08", Option{}, errAny},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatalf("test table: %v", err)
			}
			var got Option
			if tt.v6 {
				got, err = DecodeV6(b)
			} else {
				got, err = DecodeV4(b)
			}
			switch {
			case tt.wantErr == errAny && err == nil:
				t.Fatalf("got %+v, want an error", got)
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && (err != nil || got != tt.want):
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestReply: the server's answers, byte for byte.
func TestReply(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []byte
		want string
	}{
		// Client asked for S with wire encoding: N, E, O set; RCODEs 255.
		{"v4 wire, S asked", ReplyV4(Option{Flags: FlagE | FlagS}, "pc1"), "0effff03706331"},
		{"v4 ascii", ReplyV4(Option{}, "pc1"), "08ffff706331"},
		{"v4 ascii fqdn", ReplyV4(Option{}, "pc1.lab"), "08ffff7063312e6c61622e"},
		{"v4 wire fqdn", ReplyV4(Option{Flags: FlagE}, "pc1.lab"), "0cffff03706331036c616200"},
		{"v6 S asked", ReplyV6(Option{Flags: FlagS}, "pc1"), "0603706331"},
		{"v6 fqdn", ReplyV6(Option{}, "pc1.lab"), "0403706331036c616200"},
	} {
		if h := hex.EncodeToString(tt.got); h != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, h, tt.want)
		}
	}
	// What the server sends, a client decodes back to the name.
	o, err := DecodeV6(ReplyV6(Option{}, "pc1.lab"))
	if err != nil || o.Name != "pc1.lab" || o.Partial {
		t.Fatalf("round trip: %+v, %v", o, err)
	}
}
