package api

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/bootfleet/bootfleet/internal/inventory"
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`           // what is wrong and what to do
	Field string `json:"field,omitempty"` // the request field at fault, e.g. "mac"
}

// Machine is a machine on the wire. On input (POST, PUT) only mac, name,
// profile, labels, ip and root_channel are used; state, source, last_boot,
// last_address and machine_id are set by bootfleet and ignored.
type Machine struct {
	MAC         string            `json:"mac"`
	Name        string            `json:"name,omitempty"`
	Profile     string            `json:"profile,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	IP          string            `json:"ip,omitempty"`
	State       string            `json:"state,omitempty"`
	Source      string            `json:"source,omitempty"`
	LastBoot    *time.Time        `json:"last_boot,omitempty"`
	LastAddress string            `json:"last_address,omitempty"`
	MachineID   string            `json:"machine_id,omitempty"` // its systemd machine-id
	// Files and Vars are the machine's own files: and vars:; its vars
	// win over its profile's.
	Files []File            `json:"files,omitempty"`
	Vars  map[string]string `json:"vars,omitempty"`
	// RootChannel is the version of its profile's root image the machine
	// boots, over the profile's channel: empty follows the profile;
	// production, test or a version number to pin.
	RootChannel string `json:"root_channel,omitempty"`
}

// File is one files: entry of a profile or machine: a file the agent
// writes into the machine's root at every boot, rendered from Template
// (Go text/template; it sees .Name .MAC .IP .Profile .Vars.KEY).
type File struct {
	Path     string `json:"path"`
	Mode     string `json:"mode,omitempty"`  // octal, default 0644
	Owner    string `json:"owner,omitempty"` // USER or USER:GROUP; default root
	Template string `json:"template"`
}

// MachinePatch is a PATCH body: absent fields stay as they are; a label
// set to null is removed.
type MachinePatch struct {
	Name    *string            `json:"name,omitempty"`
	Profile *string            `json:"profile,omitempty"`
	IP      *string            `json:"ip,omitempty"`
	State   *string            `json:"state,omitempty"`
	Labels  map[string]*string `json:"labels,omitempty"`
	// Files and Vars, when present, replace the machine's own; an empty
	// list or object removes them.
	Files *[]File            `json:"files,omitempty"`
	Vars  *map[string]string `json:"vars,omitempty"`
	// RootChannel "" makes the machine follow its profile's channel again.
	RootChannel *string `json:"root_channel,omitempty"`
}

// Profile is a profile on the wire. Kernel is empty when RootKernel is
// image: the machine boots the kernel its root image holds.
type Profile struct {
	Name       string   `json:"name"`
	Kernel     string   `json:"kernel"`
	Initrd     []string `json:"initrd,omitempty"`
	Cmdline    string   `json:"cmdline,omitempty"`
	RootImage  string   `json:"root_image,omitempty"`
	Overlay    string   `json:"overlay,omitempty"`
	RootKernel string   `json:"root_kernel,omitempty"`
	// RootChannel is the version of RootImage the machines boot: empty
	// for production, test, or a version number pinning it.
	RootChannel string `json:"root_channel,omitempty"`
	Loader      string `json:"loader,omitempty"` // ipxe (default) or grub
	Source      string `json:"source,omitempty"`
	// ARM64 is what arm64 machines boot; absent when the profile boots
	// none. Kernel and Initrd above are the x86_64 machines'.
	ARM64 *inventory.ArchBoot `json:"arm64,omitempty"`
	// Files and Vars are the files: written into the roots of the
	// profile's machines and the vars: their templates see.
	Files []File            `json:"files,omitempty"`
	Vars  map[string]string `json:"vars,omitempty"`
}

// Lease is a DHCP lease on the wire: an IPv4 one, or a DHCPv6 one with
// its client's DUID, whose MAC is "" when the server could not tell it.
type Lease struct {
	MAC    string    `json:"mac"`
	IP     string    `json:"ip"`
	DUID   string    `json:"duid,omitempty"` // hex; DHCPv6 leases only
	Expiry time.Time `json:"expiry"`
}

// Event is a boot event on the wire.
type Event struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	MAC     string    `json:"mac"`
	Kind    string    `json:"kind"`
	Details string    `json:"details,omitempty"`
}

// List bodies.
type (
	MachineList struct {
		Machines []Machine `json:"machines"`
	}
	ProfileList struct {
		Profiles []Profile `json:"profiles"`
	}
	LeaseList struct {
		Leases []Lease `json:"leases"`
	}
	EventList struct {
		Events []Event `json:"events"`
	}
)

func machineOut(m inventory.Machine) Machine {
	out := Machine{MAC: m.MAC.String(), Name: m.Name, Profile: m.Profile, Labels: m.Labels,
		State: string(m.State), Source: string(m.Source), MachineID: m.MachineID, Files: filesOut(m.RootFiles), Vars: m.Vars,
		RootChannel: m.Channel}
	if m.IP != nil {
		out.IP = m.IP.String()
	}
	if !m.LastBoot.IsZero() {
		t := m.LastBoot
		out.LastBoot = &t
	}
	if m.LastAddress != nil {
		out.LastAddress = m.LastAddress.String()
	}
	return out
}

func parseIPField(field, s string) (net.IP, error) {
	if s == "" {
		return nil, nil
	}
	ip := net.ParseIP(s).To4()
	if ip == nil {
		return nil, inventory.Invalid(field, "want an IPv4 address like 10.0.0.50, got %q", s)
	}
	return ip, nil
}

func profileOut(p inventory.Profile) Profile {
	out := Profile{Name: p.Name, Kernel: p.Kernel, Initrd: p.Initrd, Cmdline: p.Cmdline,
		RootImage: p.Root.Image, Overlay: p.Root.Overlay, RootKernel: p.Root.Kernel, RootChannel: p.Root.Channel, Loader: p.Loader, Source: string(p.Source),
		Files: filesOut(p.RootFiles), Vars: p.Vars}
	if p.ARM64.Kernel != "" || len(p.ARM64.Initrd) > 0 {
		out.ARM64 = &p.ARM64
	}
	return out
}

func profileIn(p Profile) (inventory.Profile, error) {
	files, err := filesIn(p.Files)
	out := inventory.Profile{Name: p.Name, Kernel: p.Kernel, Initrd: p.Initrd, Cmdline: p.Cmdline,
		Root: inventory.Root{Image: p.RootImage, Overlay: p.Overlay, Kernel: p.RootKernel, Channel: p.RootChannel}, Loader: p.Loader,
		RootFiles: files, Vars: p.Vars}
	if p.ARM64 != nil {
		out.ARM64 = *p.ARM64
	}
	return out, err
}

func filesOut(fs []inventory.RootFile) []File {
	var out []File
	for _, f := range fs {
		out = append(out, File{Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode), Owner: f.Owner, Template: f.Template})
	}
	return out
}

func filesIn(fs []File) ([]inventory.RootFile, error) {
	var out []inventory.RootFile
	for i, f := range fs {
		var mode uint64
		if f.Mode != "" {
			var err error
			if mode, err = strconv.ParseUint(f.Mode, 8, 32); err != nil || mode > 0o7777 {
				return nil, inventory.Invalid("files", "files[%d] (%s): want an octal mode like 0644 or 0600, got %q", i, f.Path, f.Mode)
			}
		}
		out = append(out, inventory.RootFile{Path: f.Path, Mode: uint32(mode), Owner: f.Owner, Template: f.Template})
	}
	return out, nil
}
