package tftp

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/safefs"
)

// exchange sends raw bytes to the server and returns the first reply.
func exchange(t *testing.T, server net.Addr, pkt []byte) Packet {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteTo(pkt, server); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	if from.(*net.UDPAddr).Port == server.(*net.UDPAddr).Port {
		t.Errorf("reply came from the listening port %v, want a fresh transfer port", from)
	}
	p, err := ParsePacket(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.Mkdir(root, 0o755)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("SECRET"), 0o644)
	os.WriteFile(filepath.Join(root, "ok"), []byte("fine"), 0o644)
	os.Symlink("../secret", filepath.Join(root, "escape"))
	roots, err := safefs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { roots.Close() }) // after the server's cleanup, which stops its transfers
	addr, rec, logs := startServer(t, Config{FS: RootsFS(roots)})
	rrq := func(name, mode string, opts ...Option) []byte {
		return (&Request{Op: OpRRQ, Filename: name, Mode: mode, Options: opts}).Append(nil)
	}
	tests := []struct {
		name     string
		pkt      []byte
		wantCode ErrorCode
		wantErr  error // in the OnTransfer report; nil: no report expected
		logFile  string
	}{
		{"WRQ", (&Request{Op: OpWRQ, Filename: "upload", Mode: "octet"}).Append(nil), ErrCodeAccessViolation, nil, "upload"},
		{"not found", rrq("nope", "octet"), ErrCodeFileNotFound, fs.ErrNotExist, "nope"},
		{"dotdot", rrq("../secret", "octet"), ErrCodeAccessViolation, fs.ErrPermission, "../secret"},
		{"absolute outside", rrq("//etc/passwd", "octet"), ErrCodeAccessViolation, fs.ErrPermission, "//etc/passwd"},
		{"backslash", rrq("..\\secret", "octet"), ErrCodeAccessViolation, fs.ErrPermission, "secret"},
		{"escaping symlink", rrq("escape", "octet"), ErrCodeAccessViolation, fs.ErrPermission, "escape"},
		{"directory", rrq("/", "octet"), ErrCodeAccessViolation, fs.ErrPermission, "file=/"},
		{"mail mode", rrq("ok", "mail"), ErrCodeIllegalOperation, nil, "mail"},
		{"unknown mode", rrq("ok", "binary"), ErrCodeIllegalOperation, nil, "binary"},
		{"malformed RRQ", []byte("\x00\x01ok\x00"), ErrCodeIllegalOperation, nil, "malformed request"},
		{"bad blksize", rrq("ok", "octet", Option{"blksize", "4"}), ErrCodeOptionRefused, nil, "blksize"},
		{"bad windowsize", rrq("ok", "octet", Option{"windowsize", "x"}), ErrCodeOptionRefused, nil, "windowsize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := exchange(t, addr, tt.pkt)
			e, ok := p.(*Error)
			if !ok || e.Code != tt.wantCode {
				t.Fatalf("reply %#v, want ERROR code %d", p, tt.wantCode)
			}
			if strings.Contains(e.Message, "SECRET") {
				t.Fatal("secret leaked")
			}
			if tt.wantErr != nil {
				if st := rec.next(t); !errors.Is(st.Err, tt.wantErr) || st.Bytes != 0 {
					t.Fatalf("OnTransfer %+v, want error matching %v", st, tt.wantErr)
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for !strings.Contains(logs.String(), tt.logFile) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if l := lastLine(logs.String(), "refused"); !strings.Contains(l, tt.logFile) || !strings.Contains(l, "remote=127.0.0.1:") {
				t.Fatalf("last refusal log line %q lacks %q or the client address", l, tt.logFile)
			}
		})
	}
	// The good file is still served through the same FS.
	got, err := fetch(testCtx(t, 5*time.Second), addr, "/ok", ClientOptions{})
	if err != nil || string(got) != "fine" {
		t.Fatalf("get ok = %q, %v", got, err)
	}
}

func lastLine(s, containing string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], containing) {
			return lines[i]
		}
	}
	return ""
}

// TestIgnoredPackets: garbage and stray packets on the request port get no
// reply and do not stop the server.
func TestIgnoredPackets(t *testing.T) {
	m := newMapFS()
	m.put("f", []byte("x"))
	addr, _, logs := startServer(t, Config{FS: m})
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, p := range []string{"", "\x00", "\x00\x09zz", "\x00\x04\x00\x01", "\x00\x05\x00\x00bye\x00", "\x00\x03\x00\x01data"} {
		conn.WriteTo([]byte(p), addr)
	}
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := conn.ReadFrom(make([]byte, 100)); err == nil {
		t.Fatalf("got a %d-byte reply to garbage", n)
	}
	if got, err := fetch(testCtx(t, 5*time.Second), addr, "f", ClientOptions{}); err != nil || string(got) != "x" {
		t.Fatalf("server broken after garbage: %q %v", got, err)
	}
	if !strings.Contains(logs.String(), "undecodable") {
		t.Fatal("no debug log for the undecodable packet")
	}
}

// TestShutdown: cancelling ctx stops Serve promptly while a transfer waits
// for a silent client, and the transfer reports the shutdown.
func TestShutdown(t *testing.T) {
	m := newMapFS()
	m.put("f", randBytes(3, 100000))
	checkShutdown(t, Config{FS: m, Timeout: 10 * time.Second}, func(uint64, int) bool { return true }, nil)
}

func TestServeWithoutFS(t *testing.T) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := NewServer(Config{}).Serve(context.Background(), conn); err == nil {
		t.Fatal("Serve with nil FS succeeded")
	}
}

// TestRepeatedRRQ: an RRQ repeated while its transfer runs does not start a
// second transfer.
func TestRepeatedRRQ(t *testing.T) {
	m := newMapFS()
	m.put("f", randBytes(4, 2000))
	defer setClientWait(100 * time.Millisecond)()
	addr, rec, _ := startServer(t, Config{FS: m, Timeout: 200 * time.Millisecond})
	conn, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer conn.Close()
	rrq := (&Request{Op: OpRRQ, Filename: "f", Mode: "octet"}).Append(nil)
	conn.WriteTo(rrq, addr)
	time.Sleep(50 * time.Millisecond)
	conn.WriteTo(rrq, addr)
	ports := map[int]bool{}
	conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	buf := make([]byte, 600)
	for {
		_, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			break
		}
		ports[from.Port] = true
	}
	if len(ports) != 1 {
		t.Fatalf("DATA came from %d ports, want 1 transfer", len(ports))
	}
	conn.Close()
	if st := rec.next(t); st.Err == nil {
		t.Fatal("abandoned transfer reported success")
	}
}
