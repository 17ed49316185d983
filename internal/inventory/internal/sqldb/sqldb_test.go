package sqldb

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestRebind(t *testing.T) {
	pg := &Dialect{Numbered: true}
	if got := pg.rebind(`SELECT a FROM t WHERE b = ? AND c <> ?`); got != `SELECT a FROM t WHERE b = $1 AND c <> $2` {
		t.Fatalf("rebind = %q", got)
	}
	lite := &Dialect{}
	if got := lite.rebind(`x = ?`); got != `x = ?` {
		t.Fatalf("sqlite rebind changed the query: %q", got)
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name  string
		files fstest.MapFS
		err   string
	}{
		{"ok", fstest.MapFS{"0002_b.sql": {Data: []byte("B")}, "0001_a.sql": {Data: []byte("A")}}, ""},
		{"gap", fstest.MapFS{"0001_a.sql": {Data: []byte("A")}, "0003_b.sql": {Data: []byte("B")}}, ""},
		{"twice", fstest.MapFS{"0001_a.sql": {}, "01_b.sql": {}}, "both have version 1"},
		{"bad name", fstest.MapFS{"init.sql": {}}, "0001_init.sql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := LoadMigrations(tt.files)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil || len(ms) != 2 || ms[0].SQL != "A" || ms[1].SQL != "B" {
				t.Fatalf("got %+v, %v", ms, err)
			}
		})
	}
}

func TestScanTime(t *testing.T) {
	var got time.Time
	want := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, v := range []any{want.UnixMicro(), want.In(time.FixedZone("x", 3600))} {
		if err := (scanTime{&got}).Scan(v); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Fatalf("Scan(%v) = %v, %v", v, got, err)
		}
	}
	if err := (scanTime{&got}).Scan(nil); err != nil || !got.IsZero() {
		t.Fatalf("Scan(nil) = %v, %v", got, err)
	}
	if err := (scanTime{&got}).Scan("yesterday"); err == nil {
		t.Fatal("Scan accepted a string")
	}
}
