// Package imagelayer is the on-disk form of an image version stored as
// its differences to its parent: a layer. It is a pure codec and reader
// (bytes and io.ReaderAt in, no files opened, no logging); package
// imagestore keeps layer files, package blockstore serves them.
//
// A layer file is a header, a bitmap saying which blocks of the version
// the layer holds, and those blocks, in block order, from DataOffset:
//
//	 0      8       12      16              24                    56      64
//	+-------+-------+-------+---------------+---------------------+-------+
//	|BFLAYR1|bshift | zero  | size (bytes)  | parent sha256 (32)  | count |
//	+-------+-------+-------+---------------+---------------------+-------+
//	| bitmap: one bit per block of size, bit i%8 of byte i/8 for block i  |
//	+---------------------------------------------------------------------+
//	| zero padding up to DataOffset, a multiple of the block size         |
//	| count blocks of 1<<bshift bytes (the last one padded with zeros)    |
//	+---------------------------------------------------------------------+
//
// Integers are big-endian. A block the bitmap does not mark reads from
// the parent, which has the same size. A chain (Chain) reads a version
// through its layers down to a flat base; Diff writes the layer of a new
// content over its parent, keeping only the blocks that differ.
package imagelayer
