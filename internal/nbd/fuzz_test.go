package nbd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// Seeds live in testdata/fuzz/<Target>/ (go test reads them on every run).
// UPDATE_TESTDATA=1 go test -run TestFuzzSeeds rewrites them from
// fuzzSeeds.

func fuzzSeeds() map[string][][]byte {
	info := AppendInfoRequest(nil, InfoRequest{Name: "rw", Infos: []InfoType{InfoName, InfoBlockSize}})
	var session []byte
	session = append(session, 0, 0, 0, 3) // client flags
	session = AppendOption(session, OptStructuredReply, nil)
	session = AppendOption(session, OptList, nil)
	session = AppendOption(session, OptInfo, info)
	session = AppendOption(session, OptGo, info)
	session = AppendRequest(session, Request{Type: CmdRead, Handle: 1, Length: 512})
	session = AppendRequest(session, Request{Type: CmdWrite, Handle: 2, Offset: 512, Length: 4})
	session = append(session, 1, 2, 3, 4)
	session = AppendRequest(session, Request{Type: CmdWriteZeroes, Flags: CmdFlagNoHole, Handle: 3, Length: 4096})
	session = AppendRequest(session, Request{Type: CmdTrim, Handle: 4, Offset: 1 << 40, Length: 1})
	session = AppendRequest(session, Request{Type: CmdFlush, Flags: CmdFlagFUA, Handle: 5})
	session = AppendRequest(session, Request{Type: CmdDisc})
	exportName := append([]byte{0, 0, 0, 1}, AppendOption(nil, OptExportName, []byte("ro"))...)
	exportName = AppendRequest(exportName, Request{Type: CmdRead, Length: 1 << 30})
	return map[string][][]byte{
		"FuzzParseOption": {
			AppendOption(nil, OptGo, info),
			AppendOption(nil, OptInfo, AppendInfoRequest(nil, InfoRequest{})),
			AppendOption(nil, OptExportName, []byte("machine/secret")),
			AppendOption(nil, OptGo, []byte{0xff, 0xff, 0xff, 0xff, 0, 0}),
		},
		"FuzzParseRequest": {
			AppendRequest(nil, Request{Type: CmdRead, Handle: 1, Offset: 4096, Length: 512}),
			AppendRequest(nil, Request{Type: CmdWrite, Flags: CmdFlagFUA, Length: 1 << 31}),
			AppendRequest(nil, Request{Type: 0xffff, Flags: 0xffff, Offset: 1<<64 - 1, Length: 1<<32 - 1}),
		},
		"FuzzSession": {session, exportName, {0, 0, 0, 1}, AppendOption([]byte{0, 0, 0, 1}, OptAbort, nil)},
	}
}

func TestFuzzSeeds(t *testing.T) {
	for target, seeds := range fuzzSeeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if os.Getenv("UPDATE_TESTDATA") != "" {
			os.MkdirAll(dir, 0o755)
			for i, s := range seeds {
				body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "seed-*")); len(m) != len(seeds) {
			t.Errorf("%s: %d seed files, want %d; run UPDATE_TESTDATA=1 go test -run TestFuzzSeeds", dir, len(m), len(seeds))
		}
	}
}

func FuzzParseOption(f *testing.F) {
	for _, s := range fuzzSeeds()["FuzzParseOption"] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseOptionHeader(b)
		if err != nil {
			return
		}
		data := b[OptionHeaderLen:]
		if got := AppendOption(nil, h.Option, nil)[:OptionHeaderLen-4]; !bytes.Equal(got, b[:OptionHeaderLen-4]) {
			t.Fatalf("header re-encodes to %x, want %x", got, b[:OptionHeaderLen-4])
		}
		if r, err := ParseInfoRequest(data); err == nil {
			if again := AppendInfoRequest(nil, r); !bytes.Equal(again, data) {
				t.Fatalf("info request %+v re-encodes to %x, want %x", r, again, data)
			}
			if len(r.Name) > MaxStringLen {
				t.Fatalf("accepted a name of %d bytes", len(r.Name))
			}
		} else if !errors.Is(err, ErrOptionData) {
			t.Fatalf("ParseInfoRequest error %v is not ErrOptionData", err)
		}
		if name, err := ParseExportName(data); err == nil && name != string(data) {
			t.Fatalf("export name %q, want %q", name, data)
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range fuzzSeeds()["FuzzParseRequest"] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrBadMagic) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if again := AppendRequest(nil, r); !bytes.Equal(again, b[:RequestLen]) {
			t.Fatalf("request %+v re-encodes to %x, want %x", r, again, b[:RequestLen])
		}
		if len(b) >= RequestLen+ChunkHeaderLen {
			ParseChunkHeader(b[RequestLen:])
			ParseErrorChunk(b[RequestLen:])
			ParseInfo(b[RequestLen:])
		}
	})
}

// FuzzSession feeds arbitrary client bytes, after the greeting, to a whole
// server session: it must neither panic nor hang.
func FuzzSession(f *testing.F) {
	for _, s := range fuzzSeeds()["FuzzSession"] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		exports := &memExports{m: map[string]*memExport{
			"ro": {b: make([]byte, 64<<10), ro: true},
			"rw": {b: make([]byte, 64<<10)},
			"":   {b: make([]byte, 4096), minBlock: 512},
		}}
		srv := NewServer(exports, Config{HandshakeTimeout: 2 * time.Second, MaxInFlight: 2})
		a, b := net.Pipe()
		done := make(chan struct{})
		go func() { srv.serveConn(t.Context(), a, func() {}); close(done) }()
		go io.Copy(io.Discard, b)
		b.Write(in)
		b.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("session did not end after the client closed")
		}
		for _, x := range exports.m {
			if x.ro && !reflect.DeepEqual(x.b, make([]byte, len(x.b))) {
				t.Fatal("read-only export was modified")
			}
		}
	})
}
