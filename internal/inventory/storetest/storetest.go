package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// Backend opens stores for the suite.
type Backend interface {
	// New returns an empty store, closed by t.Cleanup.
	New(t *testing.T) inventory.Store
	// Reopen closes s and opens the same database again, to prove writes
	// are durable. The returned store is closed by t.Cleanup.
	Reopen(t *testing.T, s inventory.Store) inventory.Store
}

// Run runs the whole suite against b.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"MachineCRUD", testMachineCRUD},
		{"MachineErrors", testMachineErrors},
		{"MachineFilter", testMachineFilter},
		{"SetStatus", testSetStatus},
		{"ProfileCRUD", testProfileCRUD},
		{"ProfileErrors", testProfileErrors},
		{"Leases", testLeases},
		{"LeaseAddressNeverTwice", testLeaseRace},
		{"LeaseBatch", testLeaseBatch},
		{"LeaseTakeover", testLeaseTakeover},
		{"LeaseBatchNeverTwice", testLeaseBatchRace},
		{"Leases6", testLeases6},
		{"Lease6AddressNeverTwice", testLease6Race},
		{"Events", testEvents},
		{"Images", testImages},
		{"Boots", testBoots},
		{"BootPrune", testBootPrune},
		{"Durable", testDurable},
		{"Tokens", testTokens},
		{"Audit", testAudit},
		{"Servers", testServers},
		{"RemoveServer", testRemoveServer},
		{"ServerNameTaken", testServerNameTaken},
		{"Secrets", testSecrets},
		{"ImageCopies", testImageCopies},
		{"MachineID", testMachineID},
		{"HostKeys", testHostKeys},
		{"Power", testPower},
		{"NextBoot", testNextBoot},
		{"ScheduleRuns", testScheduleRuns},
		{"PowerSchedules", testPowerSchedules},
		{"ImageVersions", testImageVersions},
		{"ImageVersionsPut", testImageVersionsPut},
		{"RootFiles", testRootFiles},
		{"IdentityKeyRace", testIdentityKeyRace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, b) })
	}
}

func mac(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantErr checks err wraps kind and names field.
func wantErr(t *testing.T, err, kind error, field string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("got error %v, want %v", err, kind)
	}
	var ie *inventory.Error
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *inventory.Error", err)
	}
	if ie.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, ie.Field, field)
	}
}

var linux = inventory.Profile{Name: "linux", Kernel: "/srv/vmlinuz", Initrd: []string{"/srv/initrd.img", "http://x/extra.cpio"}, Cmdline: "console=ttyS0 host={{.Name}}"}

func seed(t *testing.T, s inventory.Store) {
	t.Helper()
	must[inventory.Profile](t)(s.CreateProfile(ctx(t), linux))
	must[inventory.Profile](t)(s.CreateProfile(ctx(t), inventory.Profile{Name: "rescue", Kernel: "/srv/rescue"}))
}

func testMachineCRUD(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	want := inventory.Machine{MAC: mac("52:54:00:12:34:56"), Name: "pc1", Profile: "linux",
		Labels: map[string]string{"room": "lab2", "row": "3"}, IP: net.IPv4(10, 0, 0, 50)}
	got := must[inventory.Machine](t)(s.CreateMachine(c, want))
	want.IP, want.State, want.Source = want.IP.To4(), inventory.StateReady, inventory.SourceAPI
	if why := inventory.CheckMachineID(got.MachineID); why != "" {
		t.Fatalf("CreateMachine made machine-id %q: %s", got.MachineID, why)
	}
	want.MachineID = got.MachineID
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CreateMachine returned\n %#v\nwant\n %#v", got, want)
	}
	if got := must[inventory.Machine](t)(s.GetMachine(c, want.MAC)); !reflect.DeepEqual(got, want) {
		t.Fatalf("GetMachine = %#v, want %#v", got, want)
	}
	// A machine with no name, profile, labels or IP: the discovered kind.
	bare := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), State: inventory.StateDiscovered}))
	if bare.Name != "" || bare.Profile != "" || bare.IP != nil || len(bare.Labels) != 0 || bare.State != inventory.StateDiscovered {
		t.Fatalf("bare machine came back as %#v", bare)
	}
	// A second unnamed machine: empty names are not unique.
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:02")}))

	list := must[[]inventory.Machine](t)(s.ListMachines(c, inventory.MachineFilter{}))
	if len(list) != 3 || list[0].MAC.String() != "52:54:00:00:00:01" || list[2].MAC.String() != "52:54:00:12:34:56" {
		t.Fatalf("ListMachines = %v, want 3 machines ordered by MAC", list)
	}

	upd := got
	upd.Profile, upd.Name, upd.IP, upd.Labels = "rescue", "pc1b", nil, map[string]string{"room": "lab3"}
	if got := must[inventory.Machine](t)(s.UpdateMachine(c, upd)); !reflect.DeepEqual(got, upd) {
		t.Fatalf("UpdateMachine = %#v, want %#v", got, upd)
	}
	// The old name and address are free again.
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:03"), Name: "pc1", IP: net.IPv4(10, 0, 0, 50)}))

	if err := s.DeleteMachine(c, want.MAC); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetMachine(c, want.MAC)
	wantErr(t, err, inventory.ErrNotFound, "mac")
	wantErr(t, s.DeleteMachine(c, want.MAC), inventory.ErrNotFound, "mac")
}

func testMachineErrors(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1", IP: net.IPv4(10, 0, 0, 1)}))
	tests := []struct {
		name  string
		m     inventory.Machine
		kind  error
		field string
	}{
		{"duplicate MAC", inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "other"}, inventory.ErrConflict, "mac"},
		{"duplicate name", inventory.Machine{MAC: mac("52:54:00:00:00:02"), Name: "pc1"}, inventory.ErrConflict, "name"},
		{"duplicate IP", inventory.Machine{MAC: mac("52:54:00:00:00:02"), IP: net.IPv4(10, 0, 0, 1)}, inventory.ErrConflict, "ip"},
		{"unknown profile", inventory.Machine{MAC: mac("52:54:00:00:00:02"), Profile: "nope"}, inventory.ErrInvalid, "profile"},
		{"short MAC", inventory.Machine{MAC: net.HardwareAddr{1, 2, 3}}, inventory.ErrInvalid, "mac"},
		{"bad name", inventory.Machine{MAC: mac("52:54:00:00:00:02"), Name: "pc 1"}, inventory.ErrInvalid, "name"},
		{"bad state", inventory.Machine{MAC: mac("52:54:00:00:00:02"), State: "sleeping"}, inventory.ErrInvalid, "state"},
		{"bad label", inventory.Machine{MAC: mac("52:54:00:00:00:02"), Labels: map[string]string{"a b": "c"}}, inventory.ErrInvalid, "labels"},
		{"IPv6 reservation", inventory.Machine{MAC: mac("52:54:00:00:00:02"), IP: net.ParseIP("fe80::1")}, inventory.ErrInvalid, "ip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateMachine(c, tt.m)
			wantErr(t, err, tt.kind, tt.field)
		})
	}
	t.Run("update missing", func(t *testing.T) {
		_, err := s.UpdateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:09")})
		wantErr(t, err, inventory.ErrNotFound, "mac")
	})
	t.Run("update to taken name", func(t *testing.T) {
		must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:03"), Name: "pc3"}))
		_, err := s.UpdateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:03"), Name: "pc1"})
		wantErr(t, err, inventory.ErrConflict, "name")
	})
	if n := len(must[[]inventory.Machine](t)(s.ListMachines(c, inventory.MachineFilter{}))); n != 2 {
		t.Fatalf("failed writes left %d machines, want 2", n)
	}
}

func testMachineFilter(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	for i, m := range []inventory.Machine{
		{Profile: "linux", Labels: map[string]string{"room": "a"}},
		{Profile: "linux", Labels: map[string]string{"room": "b"}},
		{Profile: "rescue", Labels: map[string]string{"room": "a"}},
		{State: inventory.StateDiscovered},
	} {
		m.MAC = mac(fmt.Sprintf("52:54:00:00:00:%02x", i+1))
		must[inventory.Machine](t)(s.CreateMachine(c, m))
	}
	tests := []struct {
		f    inventory.MachineFilter
		want []string // last MAC bytes
	}{
		{inventory.MachineFilter{}, []string{"01", "02", "03", "04"}},
		{inventory.MachineFilter{State: inventory.StateDiscovered}, []string{"04"}},
		{inventory.MachineFilter{Profile: "linux"}, []string{"01", "02"}},
		{inventory.MachineFilter{Labels: map[string]string{"room": "a"}}, []string{"01", "03"}},
		{inventory.MachineFilter{Profile: "linux", Labels: map[string]string{"room": "a"}}, []string{"01"}},
		{inventory.MachineFilter{State: inventory.StateBooted}, []string{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.f), func(t *testing.T) {
			got := []string{}
			for _, m := range must[[]inventory.Machine](t)(s.ListMachines(c, tt.f)) {
				got = append(got, fmt.Sprintf("%02x", m.MAC[5]))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func testSetStatus(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	m := must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1", Profile: "linux"}))
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	if err := s.SetStatus(c, m.MAC, inventory.StateBooting, at, net.IPv4(10, 0, 0, 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetStatus(c, m.MAC, inventory.StateBooted, time.Time{}, nil); err != nil {
		t.Fatal(err)
	}
	got := must[inventory.Machine](t)(s.GetMachine(c, m.MAC))
	if got.State != inventory.StateBooted || !got.LastBoot.Equal(at.Truncate(time.Microsecond)) ||
		got.LastAddress.String() != "10.0.0.7" || got.Name != "pc1" || got.Profile != "linux" {
		t.Fatalf("after SetStatus: %#v", got)
	}
	wantErr(t, s.SetStatus(c, mac("52:54:00:00:00:09"), inventory.StateBooting, at, nil), inventory.ErrNotFound, "mac")
	wantErr(t, s.SetStatus(c, m.MAC, "asleep", at, nil), inventory.ErrInvalid, "state")
}

func testProfileCRUD(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	got := must[inventory.Profile](t)(s.CreateProfile(c, linux))
	want := linux
	want.Source = inventory.SourceAPI
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CreateProfile = %#v, want %#v", got, want)
	}
	bare := must[inventory.Profile](t)(s.CreateProfile(c, inventory.Profile{Name: "a.b_c-1", Kernel: "k"}))
	if bare.Initrd == nil || len(bare.Initrd) != 0 {
		t.Fatalf("a profile without initrds reads back Initrd=%#v, want an empty slice", bare.Initrd)
	}
	list := must[[]inventory.Profile](t)(s.ListProfiles(c))
	if len(list) != 2 || list[0].Name != "a.b_c-1" || list[1].Name != "linux" {
		t.Fatalf("ListProfiles = %v", list)
	}
	want.Kernel, want.Initrd, want.Root = "/k2", []string{"/i2"}, inventory.Root{Image: "img.raw", Overlay: "persistent"}
	if got := must[inventory.Profile](t)(s.UpdateProfile(c, want)); !reflect.DeepEqual(got, want) {
		t.Fatalf("UpdateProfile = %#v, want %#v", got, want)
	}
	// Booting the root image's kernel: no kernel or initrds of its own.
	own := inventory.Profile{Name: "own", Cmdline: "quiet", Root: inventory.Root{Image: "debian", Kernel: "image"}, Initrd: []string{}}
	wantOwn := own
	wantOwn.Root.Overlay, wantOwn.Source = "ephemeral", inventory.SourceAPI
	if got := must[inventory.Profile](t)(s.CreateProfile(c, own)); !reflect.DeepEqual(got, wantOwn) {
		t.Fatalf("CreateProfile with root kernel image = %#v, want %#v", got, wantOwn)
	}
	if got := must[inventory.Profile](t)(s.GetProfile(c, "own")); !reflect.DeepEqual(got, wantOwn) {
		t.Fatalf("GetProfile with root kernel image = %#v, want %#v", got, wantOwn)
	}
	back := wantOwn
	back.Kernel, back.Root.Kernel, back.Loader = "/k3", "", "grub"
	if got := must[inventory.Profile](t)(s.UpdateProfile(c, back)); !reflect.DeepEqual(got, back) {
		t.Fatalf("UpdateProfile back to its own kernel = %#v, want %#v", got, back)
	}
	// Kernels for two architectures, and an arm64 one alone.
	both := back
	both.ARM64 = inventory.ArchBoot{Kernel: "/arm64/vmlinuz", Initrd: []string{"/arm64/initrd.img"}}
	if got := must[inventory.Profile](t)(s.UpdateProfile(c, both)); !reflect.DeepEqual(got, both) {
		t.Fatalf("UpdateProfile with an arm64 kernel = %#v, want %#v", got, both)
	}
	armOnly := inventory.Profile{Name: "arm", Initrd: []string{}, ARM64: inventory.ArchBoot{Kernel: "/arm64/vmlinuz"}, Source: inventory.SourceAPI}
	if got := must[inventory.Profile](t)(s.CreateProfile(c, armOnly)); !reflect.DeepEqual(got, armOnly) || !slices.Equal(got.Arches(), []string{inventory.ArchARM64}) {
		t.Fatalf("CreateProfile of an arm64-only profile = %#v (arches %v), want %#v", got, got.Arches(), armOnly)
	}
	if err := s.DeleteProfile(c, "linux"); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetProfile(c, "linux")
	wantErr(t, err, inventory.ErrNotFound, "name")
}

func testProfileErrors(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Profile: "linux"}))
	_, err := s.CreateProfile(c, linux)
	wantErr(t, err, inventory.ErrConflict, "name")
	_, err = s.CreateProfile(c, inventory.Profile{Name: "x"})
	wantErr(t, err, inventory.ErrInvalid, "kernel")
	_, err = s.CreateProfile(c, inventory.Profile{Name: "a/b", Kernel: "k"})
	wantErr(t, err, inventory.ErrInvalid, "name")
	_, err = s.CreateProfile(c, inventory.Profile{Name: "x", Kernel: "k", Initrd: []string{""}})
	wantErr(t, err, inventory.ErrInvalid, "initrd")
	_, err = s.CreateProfile(c, inventory.Profile{Name: "x", Kernel: "k", Root: inventory.Root{Image: "debian", Overlay: "ram"}})
	wantErr(t, err, inventory.ErrInvalid, "overlay")
	_, err = s.CreateProfile(c, inventory.Profile{Name: "x", Kernel: "k", Root: inventory.Root{Overlay: "none"}})
	wantErr(t, err, inventory.ErrInvalid, "root_image")
	for _, tc := range []struct {
		p     inventory.Profile
		field string
	}{
		{inventory.Profile{Name: "x", Root: inventory.Root{Kernel: "image"}}, "root_image"},
		{inventory.Profile{Name: "x", Kernel: "k", Root: inventory.Root{Image: "debian", Kernel: "image"}}, "kernel"},
		{inventory.Profile{Name: "x", Initrd: []string{"i"}, Root: inventory.Root{Image: "debian", Kernel: "image"}}, "initrd"},
		{inventory.Profile{Name: "x", Kernel: "k", Root: inventory.Root{Image: "debian", Kernel: "own"}}, "root_kernel"},
		{inventory.Profile{Name: "x", Kernel: "k", Loader: "shim"}, "loader"},
		{inventory.Profile{Name: "x", Initrd: []string{"i"}, ARM64: inventory.ArchBoot{Kernel: "k"}}, "initrd"},
		{inventory.Profile{Name: "x", Kernel: "k", ARM64: inventory.ArchBoot{Initrd: []string{"i"}}}, "arm64.initrd"},
		{inventory.Profile{Name: "x", ARM64: inventory.ArchBoot{Kernel: "k", Initrd: []string{""}}}, "arm64.initrd"},
		{inventory.Profile{Name: "x", ARM64: inventory.ArchBoot{Kernel: "k"}, Root: inventory.Root{Image: "debian", Kernel: "image"}}, "arm64"},
	} {
		_, err = s.CreateProfile(c, tc.p)
		wantErr(t, err, inventory.ErrInvalid, tc.field)
	}
	_, err = s.UpdateProfile(c, inventory.Profile{Name: "missing", Kernel: "k"})
	wantErr(t, err, inventory.ErrNotFound, "name")
	wantErr(t, s.DeleteProfile(c, "linux"), inventory.ErrConflict, "name")
	wantErr(t, s.DeleteProfile(c, "missing"), inventory.ErrNotFound, "name")
}

func testLeases(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	exp := time.Date(2026, 5, 1, 10, 0, 0, 987654321, time.UTC)
	put := func(m string, ip net.IP) error {
		return s.PutLease(c, inventory.Lease{MAC: mac(m), IP: ip, Expiry: exp})
	}
	for _, l := range []struct {
		mac string
		ip  net.IP
	}{{"52:54:00:00:00:01", net.IPv4(10, 0, 0, 100)}, {"52:54:00:00:00:02", net.IPv4(10, 0, 0, 20)}, {"52:54:00:00:00:03", net.IPv4(10, 0, 0, 3)}} {
		if err := put(l.mac, l.ip); err != nil {
			t.Fatal(err)
		}
	}
	list := must[[]inventory.Lease](t)(s.ListLeases(c))
	if len(list) != 3 || list[0].IP.String() != "10.0.0.3" || list[1].IP.String() != "10.0.0.20" || list[2].IP.String() != "10.0.0.100" {
		t.Fatalf("ListLeases = %v, want ordered by address numerically", list)
	}
	if !list[0].Expiry.Equal(exp.Truncate(time.Microsecond)) {
		t.Fatalf("expiry read back as %v, want %v", list[0].Expiry, exp)
	}
	// A MAC moving to another address replaces its lease.
	if err := put("52:54:00:00:00:01", net.IPv4(10, 0, 0, 101)); err != nil {
		t.Fatal(err)
	}
	// An address held by another MAC is refused until that lease goes.
	wantErr(t, put("52:54:00:00:00:04", net.IPv4(10, 0, 0, 20)), inventory.ErrConflict, "ip")
	if err := s.DeleteLease(c, mac("52:54:00:00:00:02")); err != nil {
		t.Fatal(err)
	}
	if err := put("52:54:00:00:00:04", net.IPv4(10, 0, 0, 20)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteLease(c, mac("52:54:00:00:00:99")); err != nil {
		t.Fatalf("deleting a missing lease: %v, want nil", err)
	}
	wantErr(t, s.PutLease(c, inventory.Lease{MAC: mac("52:54:00:00:00:05"), IP: net.ParseIP("::1"), Expiry: exp}), inventory.ErrInvalid, "ip")
	wantErr(t, s.PutLease(c, inventory.Lease{MAC: mac("52:54:00:00:00:05"), IP: net.IPv4(10, 0, 0, 9)}), inventory.ErrInvalid, "expiry")
	got := leaseMap(t, c, s)
	want := map[string]string{"52:54:00:00:00:01": "10.0.0.101", "52:54:00:00:00:03": "10.0.0.3", "52:54:00:00:00:04": "10.0.0.20"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("leases = %v, want %v", got, want)
	}
	for m, ip := range want {
		l, err := s.GetLease(c, mac(m))
		if err != nil || l.MAC.String() != m || l.IP.String() != ip || !l.Expiry.Equal(exp.Truncate(time.Microsecond)) {
			t.Fatalf("GetLease(%s) = %+v, %v; want %s until %v", m, l, err, ip, exp)
		}
	}
	_, err := s.GetLease(c, mac("52:54:00:00:00:02"))
	wantErr(t, err, inventory.ErrNotFound, "mac")
}

// leaseMap lists s's leases as MAC to address.
func leaseMap(t *testing.T, c context.Context, s inventory.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range must[[]inventory.Lease](t)(s.ListLeases(c)) {
		m[l.MAC.String()] = l.IP.String()
	}
	return m
}

// testLeaseBatch: PutLeases (DHCP's group commit) keeps PutLease's rules
// per lease, within the batch too, and what it commits is durable.
func testLeaseBatch(t *testing.T, b Backend) {
	s := b.New(t)
	lb, ok := s.(inventory.LeaseBatcher)
	if !ok {
		t.Fatalf("%T does not implement inventory.LeaseBatcher; DHCP would fsync once per lease", s)
	}
	c := ctx(t)
	exp := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	lease := func(m string, last byte) inventory.Lease {
		return inventory.Lease{MAC: mac(m), IP: net.IPv4(10, 0, 0, last), Expiry: exp}
	}
	if err := s.PutLease(c, lease("52:54:00:00:00:09", 9)); err != nil {
		t.Fatal(err)
	}
	batch := []inventory.Lease{
		lease("52:54:00:00:00:01", 1),
		lease("52:54:00:00:00:02", 9), // held by :09 before the batch
		{MAC: mac("52:54:00:00:00:03"), IP: net.ParseIP("fe80::1"), Expiry: exp},
		lease("52:54:00:00:00:04", 1), // taken by :01 earlier in this batch
		lease("52:54:00:00:00:05", 5),
		lease("52:54:00:00:00:01", 11), // :01 moves within the batch
	}
	want := []struct{ err error }{{nil}, {inventory.ErrConflict}, {inventory.ErrInvalid}, {inventory.ErrConflict}, {nil}, {nil}}
	errs, err := lb.PutLeases(c, batch)
	if err != nil {
		t.Fatalf("PutLeases: %v", err)
	}
	if len(errs) != len(batch) {
		t.Fatalf("PutLeases returned %d errors for %d leases", len(errs), len(batch))
	}
	for i, w := range want {
		if (w.err == nil) != (errs[i] == nil) || (w.err != nil && !errors.Is(errs[i], w.err)) {
			t.Errorf("lease %d (%s %v): got %v, want %v", i, batch[i].MAC, batch[i].IP, errs[i], w.err)
		}
	}
	s = b.Reopen(t, s)
	lb = s.(inventory.LeaseBatcher)
	got := leaseMap(t, c, s)
	wantLeases := map[string]string{"52:54:00:00:00:01": "10.0.0.11", "52:54:00:00:00:05": "10.0.0.5", "52:54:00:00:00:09": "10.0.0.9"}
	if !reflect.DeepEqual(got, wantLeases) {
		t.Fatalf("after the batch and a reopen, leases = %v, want %v", got, wantLeases)
	}
	if errs, err := lb.PutLeases(c, nil); err != nil || len(errs) != 0 {
		t.Fatalf("empty batch: %v %v", errs, err)
	}
}

// testLeaseRace has many writers fight over few addresses: whatever
// interleaving happens, no address may end up with two MACs.
func testLeaseRace(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	won := fight(t, func(w, a int) error {
		return s.PutLease(c, inventory.Lease{MAC: mac(fmt.Sprintf("52:54:00:00:%02x:%02x", w, a)),
			IP: net.IPv4(10, 0, 1, byte(a)), Expiry: time.Now().Add(time.Hour)})
	})
	seen := map[string]string{}
	for _, l := range must[[]inventory.Lease](t)(s.ListLeases(c)) {
		if other, dup := seen[l.IP.String()]; dup {
			t.Fatalf("address %s belongs to %s and %s", l.IP, other, l.MAC)
		}
		seen[l.IP.String()] = l.MAC.String()
	}
	for a, n := range won {
		if n != 1 {
			t.Fatalf("address index %d was granted %d times, want once", a, n)
		}
	}
}

// fight has 8 writers put leases of the same 4 addresses at once, each
// writer w for address a through put(w, a), and counts how often each
// address was granted. An error other than ErrConflict fails t.
func fight(t *testing.T, put func(w, a int) error) map[int]int {
	const writers, addrs = 8, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[int]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range addrs {
				err := put(w, a)
				if err != nil && !errors.Is(err, inventory.ErrConflict) {
					t.Errorf("writer %d: %v", w, err)
				}
				if err == nil {
					mu.Lock()
					won[a]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return won
}

func testEvents(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		m := "52:54:00:00:00:01"
		if i%2 == 1 {
			m = "52:54:00:00:00:02"
		}
		if err := s.AddEvent(c, inventory.Event{Time: t0.Add(time.Duration(i) * time.Second), MAC: mac(m), Kind: "dhcp", Details: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	all := must[[]inventory.Event](t)(s.ListEvents(c, inventory.EventFilter{}))
	if len(all) != 5 || all[0].Details != "4" || all[4].Details != "0" || !all[0].Time.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("ListEvents = %+v, want 5 newest first", all)
	}
	if all[0].ID <= all[1].ID {
		t.Fatalf("event IDs %d, %d do not increase", all[1].ID, all[0].ID)
	}
	one := must[[]inventory.Event](t)(s.ListEvents(c, inventory.EventFilter{MAC: mac("52:54:00:00:00:02"), Limit: 1}))
	if len(one) != 1 || one[0].Details != "3" {
		t.Fatalf("filtered ListEvents = %+v, want the newest of 52:54:00:00:00:02", one)
	}
	wantErr(t, s.AddEvent(c, inventory.Event{MAC: mac("52:54:00:00:00:01")}), inventory.ErrInvalid, "kind")
	// A zero time means now.
	before := time.Now().Add(-time.Second)
	if err := s.AddEvent(c, inventory.Event{MAC: mac("52:54:00:00:00:03"), Kind: "booted"}); err != nil {
		t.Fatal(err)
	}
	got := must[[]inventory.Event](t)(s.ListEvents(c, inventory.EventFilter{MAC: mac("52:54:00:00:00:03")}))
	if len(got) != 1 || got[0].Time.Before(before) {
		t.Fatalf("event with zero time read back as %+v", got)
	}
}

func testDurable(t *testing.T, b Backend) {
	s := b.New(t)
	seed(t, s)
	c := ctx(t)
	must[inventory.Machine](t)(s.CreateMachine(c, inventory.Machine{MAC: mac("52:54:00:00:00:01"), Name: "pc1", Profile: "linux"}))
	if err := s.PutLease(c, inventory.Lease{MAC: mac("52:54:00:00:00:01"), IP: net.IPv4(10, 0, 0, 5), Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	if m := must[inventory.Machine](t)(s.GetMachine(c, mac("52:54:00:00:00:01"))); m.Name != "pc1" || m.Profile != "linux" {
		t.Fatalf("after reopen: %#v", m)
	}
	if l := must[[]inventory.Lease](t)(s.ListLeases(c)); len(l) != 1 || l[0].IP.String() != "10.0.0.5" {
		t.Fatalf("leases after reopen: %v", l)
	}
	if p := must[[]inventory.Profile](t)(s.ListProfiles(c)); len(p) != 2 {
		t.Fatalf("profiles after reopen: %v", p)
	}
}

func testImages(t *testing.T, b Backend) {
	s := b.New(t)
	c := ctx(t)
	at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	sha1 := strings.Repeat("ab", 32)
	sha2 := strings.Repeat("cd", 32)
	got := must[inventory.Image](t)(s.PutImage(c, inventory.Image{Name: "debian", SHA256: sha1, Size: 4096, Imported: at}))
	if want := (inventory.Image{Name: "debian", SHA256: sha1, Size: 4096, Imported: at, Version: 1}); !reflect.DeepEqual(got, want) {
		t.Fatalf("PutImage = %#v, want %#v", got, want)
	}
	// Re-import: the name moves to the new content.
	got = must[inventory.Image](t)(s.PutImage(c, inventory.Image{Name: "debian", SHA256: sha2, Size: 1 << 40, Imported: at.Add(time.Hour)}))
	if got.SHA256 != sha2 || got.Size != 1<<40 || !got.Imported.Equal(at.Add(time.Hour)) {
		t.Fatalf("re-import = %#v, want sha %s, size 1 TiB", got, sha2)
	}
	must[inventory.Image](t)(s.PutImage(c, inventory.Image{Name: "alpine", SHA256: sha1, Size: 1}))
	list := must[[]inventory.Image](t)(s.ListImages(c))
	if len(list) != 2 || list[0].Name != "alpine" || list[1].Name != "debian" || list[0].Imported.IsZero() {
		t.Fatalf("ListImages = %v, want alpine, debian with times", list)
	}
	_, err := s.PutImage(c, inventory.Image{Name: "x", SHA256: "ABC", Size: 1})
	wantErr(t, err, inventory.ErrInvalid, "sha256")
	_, err = s.PutImage(c, inventory.Image{Name: "a/b", SHA256: sha1, Size: 1})
	wantErr(t, err, inventory.ErrInvalid, "name")

	must[inventory.Profile](t)(s.CreateProfile(c, inventory.Profile{Name: "lab", Kernel: "k", Root: inventory.Root{Image: "debian"}}))
	if p := must[inventory.Profile](t)(s.GetProfile(c, "lab")); p.Root.Overlay != "ephemeral" {
		t.Fatalf("a root without overlay reads back overlay %q, want ephemeral", p.Root.Overlay)
	}
	wantErr(t, s.DeleteImage(c, "debian"), inventory.ErrConflict, "name")
	wantErr(t, s.DeleteImage(c, "missing"), inventory.ErrNotFound, "name")
	if err := s.DeleteImage(c, "alpine"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetImage(c, "alpine")
	wantErr(t, err, inventory.ErrNotFound, "name")
	s = b.Reopen(t, s)
	if img := must[inventory.Image](t)(s.GetImage(ctx(t), "debian")); img.SHA256 != sha2 {
		t.Fatalf("after reopen: %#v", img)
	}
}
