package diskprobe

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Root is where the root file system is.
type Root struct {
	// Partition is nil when the whole device holds the file system.
	Partition *Partition
	// FS is the file system found there; its zero value when an explicit
	// Choice named a partition whose file system is not recognised.
	FS FS
	// Reason is one line for the log saying why this was chosen.
	Reason string
}

// ErrNoRoot means no root file system was found, or the one asked for
// does not exist. ErrAmbiguousRoot means several partitions could be the
// root and the admin must choose. FindRoot's errors wrap one of them when
// they are not I/O or table errors, and list what was found.
var (
	ErrNoRoot        = errors.New("no root file system")
	ErrAmbiguousRoot = errors.New("several possible root file systems")
)

const howToChoose = "choose one with bootfleet.root.part=N, bootfleet.root.part=PARTUUID=<partuuid> or bootfleet.root.part=LABEL=<label>"

// FindRoot decides where the root file system of the size-byte device r
// is, honouring an explicit Choice and otherwise following the order in
// the package documentation. Only the sectors it needs are read: a DPS
// root or an explicit number costs the table plus one file system probe.
func FindRoot(r io.ReaderAt, size int64, c Choice) (Root, error) {
	t, err := ReadTable(r, size)
	if errors.Is(err, ErrNoTable) {
		return wholeDevice(r, c, err.Error())
	}
	if err != nil {
		return Root{}, err
	}
	if len(t.Partitions) == 0 {
		return wholeDevice(r, c, fmt.Sprintf("the %s partition table is empty", t.Scheme))
	}
	if !c.automatic() {
		return explicit(r, t, c)
	}
	return automatic(r, t)
}

// wholeDevice handles a device without partitions; why says so, in
// detail for errors and up to its first colon for Reason.
func wholeDevice(r io.ReaderAt, c Choice, why string) (Root, error) {
	fs, err := probe(r)
	if err != nil {
		return Root{}, err
	}
	short, _, _ := strings.Cut(why, ":")
	switch {
	case c.Label != "" && fs.Type != "" && fs.Label == c.Label:
		return Root{FS: fs, Reason: fmt.Sprintf("whole device: %s matches %s (%s)", fs, c, short)}, nil
	case !c.automatic():
		fix := "drop bootfleet.root.part"
		if fs.Type != "" {
			fix += " to use the whole device"
		}
		return Root{}, fmt.Errorf("%w: %s matches nothing: %s and the whole device holds %s; %s",
			ErrNoRoot, c, why, fs, fix)
	case fs.Type != "":
		return Root{FS: fs, Reason: fmt.Sprintf("whole device: %s (%s)", fs, short)}, nil
	}
	return Root{}, fmt.Errorf("%w: %s and the whole device holds no ext2/3/4, xfs or btrfs file system; partition the image with a Linux root partition (GPT type root-x86-64) or make a file system on the whole image",
		ErrNoRoot, why)
}

// explicit finds the partition c names.
func explicit(r io.ReaderAt, t Table, c Choice) (Root, error) {
	var found []probed
	for _, p := range t.Partitions {
		switch {
		case c.Part != 0 && p.Number == c.Part,
			c.PartUUID != "" && strings.EqualFold(p.PartUUID, c.PartUUID):
			found = append(found, probed{p: p})
		case c.Label != "":
			fs, err := probePart(r, p)
			if err != nil {
				return Root{}, err
			}
			if p.Name == c.Label || (fs.Type != "" && fs.Label == c.Label) {
				found = append(found, probed{p, fs})
			}
		}
	}
	switch {
	case len(found) == 0:
		all, err := probeAll(r, t)
		if err != nil {
			return Root{}, err
		}
		return Root{}, fmt.Errorf("%w: %s matches no partition; the %s table has %s", ErrNoRoot, c, t.Scheme, list(all))
	case len(found) > 1:
		return Root{}, fmt.Errorf("%w: %s matches %s; %s", ErrAmbiguousRoot, c, list(found), howToChoose)
	}
	p := found[0].p
	if p.IsExtended() {
		return Root{}, fmt.Errorf("%w: %s names partition %d, an MBR extended partition (a container of logical partitions, numbered from 5); name a logical partition instead",
			ErrNoRoot, c, p.Number)
	}
	fs := found[0].fs
	if c.Label == "" {
		var err error
		if fs, err = probePart(r, p); err != nil {
			return Root{}, err
		}
	}
	reason := fmt.Sprintf("partition %d: chosen by %s", p.Number, c)
	if fs.Type == "" {
		reason += "; no ext2/3/4, xfs or btrfs superblock found there, trying it anyway in case the kernel knows its file system"
	} else {
		reason += " (" + fs.String() + ")"
	}
	return Root{Partition: &p, FS: fs, Reason: reason}, nil
}

// automatic applies DPS steps 1 and 2 of the package documentation.
func automatic(r io.ReaderAt, t Table) (Root, error) {
	if t.Scheme == "gpt" {
		for _, p := range t.Partitions {
			if p.Type == TypeRootX86_64 && p.Attributes&AttrNoAuto == 0 {
				fs, err := probePart(r, p)
				if err != nil {
					return Root{}, err
				}
				reason := fmt.Sprintf("partition %d: GPT type root-x86-64 (Discoverable Partitions Specification), %s", p.Number, fs)
				return Root{Partition: &p, FS: fs, Reason: reason}, nil
			}
		}
	}
	all, err := probeAll(r, t)
	if err != nil {
		return Root{}, err
	}
	var cands []probed
	for _, x := range all {
		if x.fs.Type != "" && skipReason(x.p) == "" {
			cands = append(cands, x)
		}
	}
	switch len(cands) {
	case 1:
		p := cands[0].p
		return Root{Partition: &p, FS: cands[0].fs, Reason: fmt.Sprintf("partition %d: the only partition with a Linux file system (%s)", p.Number, cands[0].fs)}, nil
	case 0:
		return Root{}, fmt.Errorf("%w: no partition holds a usable Linux file system; the %s table has %s; give the root partition GPT type root-x86-64 (%s) without the no-auto attribute, make an ext4, xfs or btrfs file system on it, or %s",
			ErrNoRoot, t.Scheme, list(all), TypeRootX86_64, howToChoose)
	}
	return Root{}, fmt.Errorf("%w: %d partitions hold a Linux file system: %s; %s, or give the root partition GPT type root-x86-64",
		ErrAmbiguousRoot, len(cands), list(cands), howToChoose)
}

// skipReason says why automatic selection passes over p, or "".
func skipReason(p Partition) string {
	if i, ok := knownTypes[p.Type]; ok && i.notRoot {
		return "not a root: type " + i.name
	}
	if p.Type == TypeRootX86_64 && p.Attributes&AttrNoAuto != 0 {
		return "no-auto attribute set"
	}
	return ""
}

type probed struct {
	p  Partition
	fs FS
}

func probeAll(r io.ReaderAt, t Table) ([]probed, error) {
	out := make([]probed, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		fs, err := probePart(r, p)
		if err != nil {
			return nil, err
		}
		out = append(out, probed{p, fs})
	}
	return out, nil
}

// probePart detects the file system of p; an extended partition is not
// probed (its first sector is an EBR).
func probePart(r io.ReaderAt, p Partition) (FS, error) {
	if p.IsExtended() {
		return FS{}, nil
	}
	fs, err := probe(io.NewSectionReader(r, p.Start, p.Size))
	if err != nil {
		return FS{}, fmt.Errorf("partition %d: %w", p.Number, err)
	}
	return fs, nil
}

// probe is DetectFS with ErrNoFS turned into the zero FS.
func probe(r io.ReaderAt) (FS, error) {
	fs, err := DetectFS(r)
	if errors.Is(err, ErrNoFS) {
		return FS{}, nil
	}
	return fs, err
}

// list shows partitions for an error message, e.g.
// `partition 2 (linux, ext4 LABEL="root", 1.5 GiB)`.
func list(ps []probed) string {
	if len(ps) == 0 {
		return "no partitions"
	}
	s := make([]string, len(ps))
	for i, x := range ps {
		fs := x.fs.String()
		if x.p.IsExtended() {
			fs = "container of logical partitions"
		}
		extra := ""
		if x.p.Name != "" {
			extra += fmt.Sprintf(", name %q", x.p.Name)
		}
		if why := skipReason(x.p); why != "" && x.fs.Type != "" {
			extra += ", " + why
		}
		s[i] = fmt.Sprintf("partition %d (%s, %s, %s%s)", x.p.Number, typeName(x.p.Type), fs, humanSize(x.p.Size), extra)
	}
	return strings.Join(s, "; ")
}

func humanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + units[u]
}
