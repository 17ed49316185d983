package imagestore

import (
	"errors"
	"fmt"
)

// Every error about the uploaded content wraps ErrRefused through one of
// the kinds below, so a caller can tell "fix the image" (answer 400) from
// "fix the server". The message of such an error is meant for the person
// who uploaded the image: it says what arrived and what to do.
var (
	// ErrRefused is wrapped by every error about the uploaded content.
	ErrRefused = errors.New("imagestore: image refused")
	// ErrUnsupported: a format or variant the store does not convert
	// (a qcow version above 3, an encrypted qcow2, QED, ...).
	ErrUnsupported = fmt.Errorf("%w: unsupported format", ErrRefused)
	// ErrExternalFile: the image names other files (a backing file, an
	// external data file, extents in other files, a VMDK descriptor).
	// Converting it would read files of the server's choosing, not what
	// was uploaded, so it is refused before qemu-img opens them.
	ErrExternalFile = fmt.Errorf("%w: it names files outside itself", ErrRefused)
	// ErrBadImage: the content is empty, damaged or cut short, or qemu-img
	// could not read or convert it (its message is in the error).
	ErrBadImage = fmt.Errorf("%w: damaged image", ErrRefused)
)

// ErrNoQemuImg means an upload needs converting and the server has no
// qemu-img. It is the server's to fix, not the uploader's.
var ErrNoQemuImg = errors.New("imagestore: qemu-img not found")

// refusal is an error about the uploaded content: kind is one of the
// sentinels above, msg the whole message.
type refusal struct {
	kind error
	msg  string
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}
