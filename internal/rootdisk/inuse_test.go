package rootdisk

import (
	"errors"
	"io"
	"testing"
)

// forgetBoots drops every boot the manager promised, as if each machine
// had booted again elsewhere; what stays is connections and overlays.
func (f *fixture) forgetBoots() {
	f.m.mu.Lock()
	f.m.boot = map[string]*boot{}
	f.m.mu.Unlock()
}

// TestInUse: each thing that keeps content in use keeps drop from
// running; content nothing uses is dropped.
func TestInUse(t *testing.T) {
	const mac = "52:54:00:00:00:01"
	errDisk := errors.New("read-only file system")
	tests := []struct {
		name      string
		setup     func(t *testing.T, f *fixture) (cleanup func())
		noDrop    bool  // call InUse with a nil drop
		dropErr   error // what drop returns
		wantInUse bool
	}{
		{name: "nothing uses it"},
		{name: "a boot is issued on it", setup: func(t *testing.T, f *fixture) func() {
			f.issue(t, mac, "ephemeral")
			return nil
		}, wantInUse: true},
		{name: "a machine is connected", setup: func(t *testing.T, f *fixture) func() {
			e, err := f.m.Lookup(f.issue(t, mac, "ephemeral"), tcp("10.0.0.9"))
			if err != nil {
				t.Fatal(err)
			}
			f.forgetBoots()
			return func() { e.(io.Closer).Close() }
		}, wantInUse: true},
		{name: "a persistent overlay is made on it", setup: func(t *testing.T, f *fixture) func() {
			write(t, f, f.issue(t, mac, "persistent"), []byte("mine"), 0)
			f.forgetBoots()
			return nil
		}, wantInUse: true},
		{name: "a base export is read", setup: func(t *testing.T, f *fixture) func() {
			f.m.cfg.BaseKey = make([]byte, 32)
			arg, err := f.m.Issue(mustMAC(mac), f.img, "client-ram")
			if err != nil {
				t.Fatal(err)
			}
			e, err := f.m.Lookup(arg[len("nbd:10.0.0.1:10809:"):], tcp("10.0.0.9"))
			if err != nil {
				t.Fatal(err)
			}
			f.forgetBoots()
			return func() { e.(io.Closer).Close() }
		}, wantInUse: true},
		{name: "only asked", noDrop: true},
		{name: "drop fails", dropErr: errDisk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				if cleanup := tt.setup(t, f); cleanup != nil {
					defer cleanup()
				}
			}
			ran := false
			drop := func() error { ran = true; return tt.dropErr }
			if tt.noDrop {
				drop = nil
			}
			inUse, err := f.m.InUse(f.img.SHA256, drop)
			if inUse != tt.wantInUse || !errors.Is(err, tt.dropErr) || (tt.dropErr == nil && err != nil) {
				t.Fatalf("InUse = %v, %v; want %v, %v", inUse, err, tt.wantInUse, tt.dropErr)
			}
			if wantRan := !tt.wantInUse && !tt.noDrop; ran != wantRan {
				t.Fatalf("drop ran = %v, want %v", ran, wantRan)
			}
		})
	}
}
