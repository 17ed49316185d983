package imagepeer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dirContent serves files named by their sha from a directory.
type dirContent string

func (d dirContent) Parent(string) string { return "" }

func (d dirContent) OpenContent(sha string) (*os.File, error) {
	return os.Open(filepath.Join(string(d), sha))
}

// stored writes data into a new dirContent and returns it with data's
// sha256.
func stored(t *testing.T, data []byte) (dirContent, string) {
	t.Helper()
	dir := t.TempDir()
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, sha), data, 0o440); err != nil {
		t.Fatal(err)
	}
	return dirContent(dir), sha
}

func TestHandler(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	data := bytes.Repeat([]byte("bootfleet"), 100000)
	content, sha := stored(t, data)
	srv := httptest.NewServer(Handler(HandlerConfig{Content: content, Secret: key}))
	defer srv.Close()
	ctx := context.Background()

	c := &Client{Self: "boot-b", Secret: key}
	b, err := c.Open(ctx, srv.URL, sha, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	b.Close()
	if err != nil || !bytes.Equal(got, data) || b.Size != int64(len(data)) {
		t.Fatalf("fetched %d bytes (size %d), err %v; want the %d stored", len(got), b.Size, err, len(data))
	}

	tests := []struct {
		name   string
		client *Client
		sha    string
		want   string
	}{
		{"missing", c, fmt.Sprintf("%064x", 1), "404"},
		{"other fleet", &Client{Self: "boot-x", Secret: bytes.Repeat([]byte{9}, 32)}, sha, "401"},
		{"clock off", &Client{Self: "boot-b", Secret: key, Now: func() time.Time { return time.Now().Add(-time.Hour) }}, sha, "401"},
		{"bad sha", c, "../../etc/passwd", "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.client.Open(ctx, srv.URL, tt.sha, 0)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open error %v, want %s", err, tt.want)
			}
		})
	}

	// A machine on the LAN with no signature gets nothing, not even the size.
	resp, err := http.Get(srv.URL + Prefix + "images/" + sha)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || bytes.Contains(body, data[:100]) {
		t.Fatalf("unsigned GET: %s, %d bytes; want 401 and no content", resp.Status, len(body))
	}
}

// TestHandlerBusy: transfers beyond MaxTransfers are answered 503.
func TestHandlerBusy(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	dir := t.TempDir()
	data := make([]byte, 16<<20) // more than the sockets buffer
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(dir, sha), data, 0o440); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(HandlerConfig{Content: dirContent(dir), Secret: key, MaxTransfers: 1}))
	defer srv.Close()
	c := &Client{Self: "boot-b", Secret: key}
	first, err := c.Open(context.Background(), srv.URL, sha, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	first.Read(make([]byte, 1)) // the transfer is under way, unread
	_, err = c.Open(context.Background(), srv.URL, sha, 0)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("second transfer at once: %v, want 503", err)
	}
}

// TestHandlerRefusalLog: a host probing the path gets 401 every time and
// costs one log line per 10 s, which counts the others.
func TestHandlerRefusalLog(t *testing.T) {
	var log bytes.Buffer
	now := time.Unix(1_800_000_000, 0)
	h := Handler(HandlerConfig{Content: dirContent(t.TempDir()), Secret: bytes.Repeat([]byte{1}, 32),
		Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	get := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", Prefix+"images/"+fmt.Sprintf("%064x", 1), nil))
		return w.Code
	}
	for i := range 50 {
		if code := get(); code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d, want 401", i, code)
		}
	}
	now = now.Add(11 * time.Second)
	get()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "refused_unlogged=49") {
		t.Fatalf("log after 51 refusals over 11 s:\n%s\nwant 2 lines, the second counting 49", log.String())
	}
}
