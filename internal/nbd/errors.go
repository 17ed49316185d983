package nbd

import "errors"

// Sentinel errors of the codec. Parse functions wrap them with what was
// expected and what arrived; test with errors.Is.
var (
	// ErrShort means a message is shorter than its fixed layout.
	ErrShort = errors.New("nbd: message too short")
	// ErrBadMagic means a magic number is not the one the protocol requires
	// here; the peer does not speak NBD, or the stream lost sync.
	ErrBadMagic = errors.New("nbd: bad magic")
	// ErrClientFlags means the client set flags the server did not offer.
	ErrClientFlags = errors.New("nbd: unknown client flags")
	// ErrOptionData means option data does not match the option's layout.
	ErrOptionData = errors.New("nbd: malformed option data")
	// ErrReplyData means an option reply or reply chunk payload is malformed.
	ErrReplyData = errors.New("nbd: malformed reply data")
)

// Errors an Exports implementation returns from Lookup to choose the reply
// a refused client gets.
var (
	// ErrUnknownExport: no such export; the client gets NBD_REP_ERR_UNKNOWN.
	ErrUnknownExport = errors.New("nbd: unknown export")
	// ErrRefused: the export exists but this client may not have it (wrong
	// secret, wrong source address); the client gets NBD_REP_ERR_POLICY.
	ErrRefused = errors.New("nbd: export refused by policy")
)
