// Package sqlite is the embedded inventory store: one SQLite file in the
// data directory, through the pure-Go modernc.org/sqlite driver, so the
// binary still builds with CGO_ENABLED=0 and needs nothing installed.
//
// The database runs in WAL mode with synchronous=FULL: a commit returns
// only after the WAL is fsynced, so a lease written by PutLease survives
// a crash or power cut. All writes go through one connection (SQLite has a
// single writer anyway); reads use a small pool of read-only connections.
package sqlite
