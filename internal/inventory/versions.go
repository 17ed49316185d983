package inventory

import (
	"context"
	"time"
)

// VersionState is where an image version stands in its life.
type VersionState string

// The states of an image version. A version is made in maintenance (an
// edit, booted read-write by one machine) or straight in test or
// production (an import); it leaves by retirement, or by abandon while it
// is in maintenance.
const (
	VersionMaintenance VersionState = "maintenance"
	VersionTest        VersionState = "test"
	VersionProduction  VersionState = "production"
	VersionRetired     VersionState = "retired"
)

// VersionOp is a step of the version state machine.
type VersionOp string

// The steps Step knows.
const (
	OpCommit   VersionOp = "commit"   // maintenance → test
	OpAbandon  VersionOp = "abandon"  // maintenance → gone
	OpPromote  VersionOp = "promote"  // test, or an earlier production → current production
	OpRollback VersionOp = "rollback" // current production → test, the earlier production current again
	OpRetire   VersionOp = "retire"   // test, or a production no longer current → retired
)

// ImageVersion is one version of an image: its content and where it came
// from. An image's versions are numbered from 1 in the order they were
// made; the image's current content (Image.SHA256) is its current
// production version's, the production version promoted last.
type ImageVersion struct {
	Image   string
	Version int
	SHA256  string // of the content as served, all layers read through
	// Parent is the version this one was made from and stores only its
	// differences to; 0 for a version stored whole.
	Parent int
	State  VersionState
	By     string    // the token that made it ("" when made by the server itself)
	Made   time.Time // when it was made
	Size   int64     // bytes as served
	// Stored is the bytes this version adds to a server's data
	// directory: its own layer, or its whole content without a parent.
	Stored int64
	// Promoted is when the version last became the current production
	// version; zero if it never did.
	Promoted time.Time
	// Machine is the MAC of the machine that boots a maintenance version
	// read-write, and Server the server holding its writes; empty in any
	// other state. Until it is committed, a maintenance version's SHA256
	// is the content it was opened on, its parent's.
	Machine string
	Server  string
}

// ImageVersions is the version half of a Store. Every change is one
// transaction that also moves the image's current content when it
// changes, so every server reading the store sees a promote or a
// rollback whole or not at all.
type ImageVersions interface {
	// ListImageVersions returns image's versions ordered by number, or
	// ErrNotFound when there is no such image; image "" lists every
	// image's, ordered by image, then number.
	ListImageVersions(ctx context.Context, image string) ([]ImageVersion, error)
	// AddImageVersion records v as the image's next version and returns
	// it numbered. The first version of an image is made its production
	// version whatever v.State says; a production version becomes
	// current. A maintenance version while another is open fails with
	// ErrConflict naming the machine holding it.
	AddImageVersion(ctx context.Context, v ImageVersion) (ImageVersion, error)
	// StepImageVersion applies op, at time at, to version of image
	// (version 0 for rollback, which acts on the current production
	// version) and returns the version as it is now (abandon: as it
	// was). A refused step fails with ErrConflict saying why.
	StepImageVersion(ctx context.Context, image string, version int, op VersionOp, at time.Time) (ImageVersion, error)
	// CommitImageVersion commits maintenance version of image, as
	// StepImageVersion would, recording its new content and the bytes
	// its layer stores.
	CommitImageVersion(ctx context.Context, image string, version int, sha string, stored int64, at time.Time) (ImageVersion, error)
}

// Step is the version state machine: the state a version in from moves
// to under op, current saying whether it is the image's current
// production version. Abandon moves to "" (the version is deleted). A
// refused step is an ErrConflict error saying what to do instead.
func Step(from VersionState, op VersionOp, current bool) (VersionState, error) {
	refuse := func(format string, args ...any) (VersionState, error) {
		return from, Conflict("state", format, args...)
	}
	switch op {
	case OpCommit:
		if from == VersionMaintenance {
			return VersionTest, nil
		}
		return refuse("only a maintenance version can be committed; this one is %s", from)
	case OpAbandon:
		if from == VersionMaintenance {
			return "", nil
		}
		return refuse("only a maintenance version can be abandoned; this one is %s (retire it instead)", from)
	case OpPromote:
		switch {
		case from == VersionTest, from == VersionProduction && !current:
			return VersionProduction, nil
		case from == VersionProduction:
			return refuse("this version is already the current production version")
		case from == VersionMaintenance:
			return refuse("a maintenance version cannot be promoted; commit it first (bootfleet image commit), then test it")
		}
		return refuse("a retired version cannot be promoted; import its content again as a new version")
	case OpRollback:
		if from == VersionProduction && current {
			return VersionTest, nil
		}
		return refuse("only the current production version can be rolled back; this one is %s", describe(from, current))
	case OpRetire:
		switch {
		case from == VersionTest, from == VersionProduction && !current:
			return VersionRetired, nil
		case from == VersionProduction:
			return refuse("the current production version cannot be retired; promote another version or roll back first")
		case from == VersionMaintenance:
			return refuse("a maintenance version is not retired but abandoned (bootfleet image abandon)")
		}
		return refuse("this version is already retired")
	}
	return from, invalid("op", "want commit, abandon, promote, rollback or retire, got %q", op)
}

func describe(s VersionState, current bool) string {
	if s == VersionProduction && !current {
		return "an earlier production version"
	}
	return string(s)
}

// ValidVersionState reports whether s is one of the four states.
func ValidVersionState(s VersionState) bool {
	switch s {
	case VersionMaintenance, VersionTest, VersionProduction, VersionRetired:
		return true
	}
	return false
}

// Validate checks v before it is recorded and fills Made when zero.
func (v *ImageVersion) Validate(now time.Time) error {
	img := Image{Name: v.Image, SHA256: v.SHA256, Size: v.Size, Imported: v.Made}
	if err := img.Validate(now); err != nil {
		return err
	}
	v.Made = img.Imported
	switch {
	case !ValidVersionState(v.State):
		return invalid("state", "want maintenance, test, production or retired, got %q", v.State)
	case v.State == VersionRetired:
		return invalid("state", "a new version cannot be retired")
	case v.Parent < 0:
		return invalid("parent", "want a version number or 0 (none), got %d", v.Parent)
	case v.Stored < 0:
		return invalid("stored", "want bytes stored, 0 or more, got %d", v.Stored)
	case v.State == VersionMaintenance && v.Machine == "":
		return invalid("machine", "a maintenance version needs the machine that edits it")
	case v.State != VersionMaintenance && (v.Machine != "" || v.Server != ""):
		return invalid("machine", "only a maintenance version has a machine; this one is %s", v.State)
	}
	return nil
}
