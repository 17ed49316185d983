// Package blockstore holds the disks bootfleet serves over NBD: read-only
// base images shared by many machines, and one copy-on-write overlay per
// machine on top of a base.
//
// Every disk is an io.ReaderAt/io.WriterAt with a known size, and an
// nbd.Export whose Store answers READs, so the NBD server (internal/nbd)
// serves any of it without knowing the storage, and the choice of how a
// READ's bytes leave is made here.
//
//   - image.go: Image, a base image opened read-only (OpenImage); Base,
//     what an overlay needs from its base.
//   - overlay.go, mapfile.go, flush.go: Overlay, per-machine writes stored
//     block by block in a data file, with an allocation map file saying
//     which blocks live in the overlay, which read as zeroes, and which
//     still come from the base.
//   - disk.go: Mode (ephemeral, persistent, none) and Open, which builds
//     the Disk a machine's profile asks for.
//   - read.go: where a READ is answered. readNow (on the server's request
//     loop) and readSpan (on a worker) pick, for Image, Overlay and mode
//     none alike, among the sources a disk has: its base image's mapping,
//     a span of the image file for sendfile, a load through the mapping,
//     the page cache, or ReadAt.
//   - cached*.go: the sources that do not wait for storage (RWF_NOWAIT,
//     tmpfs, cachestat), the image's mapping and loads, and WriteNow.
//   - stream_linux.go: streams, which turn a client's sequential loads of
//     an image into one sequential read of the file.
//
// Durability: a write is durable once Flush returns. Flush fsyncs the data
// file before it writes and fsyncs the allocation map, so the map on disk
// never points at data that is not on disk; see Overlay.Flush.
package blockstore
