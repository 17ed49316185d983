package tftp

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestNegotiate(t *testing.T) {
	lim := limits{maxBlockSize: 1468, maxWindow: 64}
	tests := []struct {
		name     string
		opts     []Option
		wantBlk  int
		wantWin  int
		wantTO   time.Duration
		wantOACK string
		wantErr  bool
	}{
		{name: "none", wantBlk: 512, wantWin: 1, wantOACK: "[]"},
		{name: "blksize", opts: []Option{{"blksize", "1024"}}, wantBlk: 1024, wantWin: 1, wantOACK: "[{blksize 1024}]"},
		{name: "blksize clamped", opts: []Option{{"blksize", "65464"}}, wantBlk: 1468, wantWin: 1, wantOACK: "[{blksize 1468}]"},
		{name: "blksize minimum", opts: []Option{{"blksize", "8"}}, wantBlk: 8, wantWin: 1, wantOACK: "[{blksize 8}]"},
		{name: "blksize below 8", opts: []Option{{"blksize", "7"}}, wantErr: true},
		{name: "blksize junk", opts: []Option{{"blksize", "12a"}}, wantErr: true},
		{name: "blksize huge", opts: []Option{{"blksize", "99999999999999999999"}}, wantErr: true},
		{name: "windowsize", opts: []Option{{"windowsize", "16"}}, wantBlk: 512, wantWin: 16, wantOACK: "[{windowsize 16}]"},
		{name: "windowsize clamped", opts: []Option{{"windowsize", "65535"}}, wantBlk: 512, wantWin: 64, wantOACK: "[{windowsize 64}]"},
		{name: "windowsize 0", opts: []Option{{"windowsize", "0"}}, wantErr: true},
		{name: "tsize", opts: []Option{{"tsize", "0"}}, wantBlk: 512, wantWin: 1, wantOACK: "[{tsize 4242}]"},
		{name: "tsize junk ignored", opts: []Option{{"tsize", "x"}}, wantBlk: 512, wantWin: 1, wantOACK: "[]"},
		{name: "timeout", opts: []Option{{"timeout", "2"}}, wantBlk: 512, wantWin: 1, wantTO: 2 * time.Second, wantOACK: "[{timeout 2}]"},
		{name: "timeout 256 ignored", opts: []Option{{"timeout", "256"}}, wantBlk: 512, wantWin: 1, wantOACK: "[]"},
		{name: "unknown ignored", opts: []Option{{"multicast", ""}, {"rollover", "0"}}, wantBlk: 512, wantWin: 1, wantOACK: "[]"},
		{name: "first duplicate wins", opts: []Option{{"blksize", "1000"}, {"BLKSIZE", "7"}}, wantBlk: 1000, wantWin: 1, wantOACK: "[{blksize 1000}]"},
		{name: "order and spelling kept", opts: []Option{{"WindowSize", "4"}, {"TSize", "0"}, {"BlkSize", "1400"}},
			wantBlk: 1400, wantWin: 4, wantOACK: "[{WindowSize 4} {TSize 4242} {BlkSize 1400}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := negotiate(tt.opts, 4242, lim)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("negotiate(%v) = %+v, want error", tt.opts, p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.blockSize != tt.wantBlk || p.windowSize != tt.wantWin || p.timeout != tt.wantTO || fmt.Sprint(p.oack) != tt.wantOACK {
				t.Fatalf("negotiate(%v) = %+v, want blk %d win %d timeout %v oack %s", tt.opts, p, tt.wantBlk, tt.wantWin, tt.wantTO, tt.wantOACK)
			}
			if len(tt.opts) == 0 && p.oack != nil {
				t.Fatal("no options must mean no OACK")
			}
		})
	}
}

func TestNegotiateMulticast(t *testing.T) {
	lim := limits{maxBlockSize: 1468, maxWindow: 64, multicast: true}
	ipxe := []Option{{"blksize", "1432"}, {"tsize", "0"}, {"multicast", ""}}
	tests := []struct {
		name     string
		opts     []Option
		size     int64
		lim      limits
		wantMC   bool
		wantWin  int
		wantOACK string
	}{
		{"ipxe tftm", ipxe, 4242, lim, true, 1, "[{blksize 1432} {tsize 4242}]"},
		{"server off", ipxe, 4242, limits{maxBlockSize: 1468, maxWindow: 64}, false, 1, "[{blksize 1432} {tsize 4242}]"},
		{"windowsize dropped", append([]Option{{"windowsize", "8"}}, ipxe...), 4242, lim, true, 1, "[{blksize 1432} {tsize 4242}]"},
		{"65535 blocks", ipxe, 65534*1432 + 5, lim, true, 1, "[{blksize 1432} {tsize 93844693}]"},
		{"65536 blocks: unicast", ipxe, 65535 * 1432, lim, false, 1, "[{blksize 1432} {tsize 93846120}]"},
		{"unknown size: unicast", []Option{{"multicast", ""}}, -1, lim, false, 1, "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := negotiate(tt.opts, tt.size, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			if p.multicast != tt.wantMC || p.windowSize != tt.wantWin || fmt.Sprint(p.oack) != tt.wantOACK {
				t.Fatalf("negotiate(%v, %d) = multicast %v win %d oack %v, want %v %d %s", tt.opts, tt.size, p.multicast, p.windowSize, p.oack, tt.wantMC, tt.wantWin, tt.wantOACK)
			}
		})
	}
}

func TestMcastOption(t *testing.T) {
	tests := []struct {
		in      string
		want    mcastOption
		wantErr bool
	}{
		{in: "239.255.69.7,1758,1", want: mcastOption{netip.MustParseAddrPort("239.255.69.7:1758"), true}},
		{in: "239.255.69.7,1758,0", want: mcastOption{netip.MustParseAddrPort("239.255.69.7:1758"), false}},
		{in: ",,1", want: mcastOption{master: true}},
		{in: ",,0", want: mcastOption{}},
		{in: "239.1.1.1,1758", wantErr: true},
		{in: "239.1.1.1,1758,2", wantErr: true},
		{in: "239.1.1.1,1758,", wantErr: true},
		{in: "10.0.0.1,1758,1", wantErr: true},
		{in: "ff02::1,1758,1", wantErr: true},
		{in: "239.1.1.1,0,1", wantErr: true},
		{in: "239.1.1.1,65536,1", wantErr: true},
		{in: "239.1.1.1,+17,1", wantErr: true},
		{in: "239.1.1.1,,1", wantErr: true},
		{in: ",1758,1", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseMcastOption(tt.in)
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrMalformed) {
					t.Fatalf("parseMcastOption(%q) = %+v, %v; want an ErrMalformed", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseMcastOption(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.in {
				t.Fatalf("%+v formats as %q, want %q", got, got.String(), tt.in)
			}
		})
	}
}

// FuzzParseMcastOption: parsing never panics, and what parses formats back
// to the same text.
func FuzzParseMcastOption(f *testing.F) {
	f.Fuzz(func(t *testing.T, v string) {
		m, err := parseMcastOption(v)
		if err != nil {
			return
		}
		again, err := parseMcastOption(m.String())
		if err != nil || again != m {
			t.Fatalf("%q parsed as %+v, which formats as %q and parses as %+v, %v", v, m, m.String(), again, err)
		}
	})
}

func TestBlockSizeForMTU(t *testing.T) {
	tests := []struct {
		mtu  int
		ip   string
		want int
	}{
		{1500, "10.0.0.1", 1468},
		{9000, "10.0.0.1", 8968},
		{1500, "fd00::1", 1448},
		{65536, "127.0.0.1", 65504}, // above 65464: the RFC cap applies after
	}
	for _, tt := range tests {
		if got := blockSizeForMTU(tt.mtu, parseIP(t, tt.ip)); got != tt.want {
			t.Errorf("blockSizeForMTU(%d, %s) = %d, want %d", tt.mtu, tt.ip, got, tt.want)
		}
	}
}

func TestRTTEstimator(t *testing.T) {
	e := newRTTEstimator(time.Second, 50*time.Millisecond, time.Second)
	if e.timeout() != time.Second {
		t.Fatalf("initial RTO %v, want 1s", e.timeout())
	}
	e.sample(100 * time.Millisecond) // srtt 100ms, rttvar 50ms -> 300ms
	if e.timeout() != 300*time.Millisecond {
		t.Fatalf("RTO after first sample %v, want 300ms", e.timeout())
	}
	for i := 0; i < 50; i++ {
		e.sample(100 * time.Microsecond)
	}
	if e.timeout() != 50*time.Millisecond {
		t.Fatalf("RTO on a fast link %v, want the 50ms floor", e.timeout())
	}
	e.backoff()
	if e.timeout() != 100*time.Millisecond {
		t.Fatalf("RTO after backoff %v, want 100ms", e.timeout())
	}
	for i := 0; i < 10; i++ {
		e.backoff()
	}
	if e.timeout() != time.Second {
		t.Fatalf("RTO after many backoffs %v, want the 1s ceiling", e.timeout())
	}
	e.sample(5 * time.Second)
	if e.timeout() != time.Second {
		t.Fatalf("RTO after a slow sample %v, want the 1s ceiling", e.timeout())
	}
}
