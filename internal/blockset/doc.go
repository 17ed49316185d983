// Package blockset is the set of blocks a machine's server-side overlay
// holds, and its wire form. The server sends it to the agent at connect,
// and the agent never answers a block in the set from the shared cache of
// the base image: the overlay's copy, written in this boot or an earlier
// one, is the machine's data. Blocks the overlay reads as zeroes (trimmed)
// are in the set too: they do not come from the base either.
//
// A Set is a sorted list of disjoint extents, so its memory and its
// encoding grow with the number of runs of written blocks, not with the
// size of the disk: an overlay of 20 GiB with a few thousand scattered
// writes is a few kilobytes. The encoding (codec.go) writes the extents
// as varint gaps and lengths, or, when the blocks are so scattered that
// a plain bitmap of the span they cover is smaller, that bitmap: the
// encoding is never larger than a bitmap plus a few bytes of header.
//
// The package is pure: no I/O, no logging.
package blockset
