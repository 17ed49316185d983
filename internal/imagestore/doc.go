// Package imagestore keeps root disk images content-addressed in the data
// directory: DATA/images/sha256/<hex>. Content never changes once stored
// (files are read-only and named by their hash), so a machine that booted
// a version keeps reading exactly that version after the name moves on.
// Names live in the inventory (inventory.Images), not here.
//
// Images are stored raw and sparse, as the NBD server serves them: an
// upload in another format (qcow2, VMDK, VHDX, VHD, VDI; DetectFormat
// tells them from the content) is converted once with qemu-img, and the
// sha256 names the raw content. An image that names other files (a
// backing file, an external data file, a VMDK descriptor's extents) is
// refused, so the server never serves a file it was not sent.
//
// A version made from another (an import under an existing name, a
// committed maintenance version) is stored as a layer of the blocks that
// differ from its parent, in DATA/images/layers/<hex> (package
// imagelayer's format): layers.go finds and reads a content through its
// chain, layerwrite.go makes layers, layercopy.go takes a peer's layer
// after checking the content it reads as. Merge flattens a chain into a
// whole file under the same hash.
package imagestore
