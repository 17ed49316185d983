// Package blockstore holds the disks bootfleet serves over NBD: read-only
// base images shared by many machines, and one copy-on-write overlay per
// machine on top of a base.
//
// Everything is an io.ReaderAt/io.WriterAt with a known size, so the NBD
// server (internal/nbd) serves any of it without knowing the storage.
//
//   - image.go: Image, a base image opened read-only from a file.
//   - overlay.go, mapfile.go: Overlay, per-machine writes stored block by
//     block in a data file, with an allocation map file saying which
//     blocks live in the overlay, which read as zeroes, and which still
//     come from the base.
//   - disk.go: Mode (ephemeral, persistent, none) and Open, which builds
//     the Disk a machine's profile asks for.
//
// Durability: a write is durable once Flush returns. Flush fsyncs the data
// file before it writes and fsyncs the allocation map, so the map on disk
// never points at data that is not on disk; see Overlay.Flush.
package blockstore
