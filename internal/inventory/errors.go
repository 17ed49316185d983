package inventory

import (
	"errors"
	"fmt"
)

// Sentinel errors every Store returns, wrapped in an [*Error] that names the
// field at fault. Test with errors.Is.
var (
	// ErrNotFound: the machine, profile or lease named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write would duplicate a unique MAC, name or address,
	// or remove something still in use.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: a field's value is malformed or refers to nothing.
	ErrInvalid = errors.New("invalid")
)

// Error is a store error about one field. Field uses the JSON names of the
// model ("mac", "name", "profile", "ip", ...) so the API can pass it on.
type Error struct {
	Kind  error  // ErrNotFound, ErrConflict or ErrInvalid
	Field string // may be empty when no single field is at fault
	Msg   string // says what is wrong and what to do, e.g. "name pc1 is already used by 52:54:00:12:34:56"
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrConflict) and friends work.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(field, format string, args ...any) error {
	return &Error{Kind: ErrInvalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// NotFound returns an ErrNotFound error about field.
func NotFound(field, format string, args ...any) error {
	return &Error{Kind: ErrNotFound, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Conflict returns an ErrConflict error about field.
func Conflict(field, format string, args ...any) error {
	return &Error{Kind: ErrConflict, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Invalid returns an ErrInvalid error about field.
func Invalid(field, format string, args ...any) error { return invalid(field, format, args...) }
