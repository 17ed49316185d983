// Package identity is the wire form of what makes a diskless machine
// itself: its host name, its systemd machine-id, its SSH host keys and
// the files rendered for it. The server (package identitysvc) encodes an
// Identity per boot; the agent decodes it, and Decode checks everything
// the agent will write into the new root, so a bad answer is refused as
// a whole and no machine boots with half of it. Pure: no I/O, no logging.
package identity
