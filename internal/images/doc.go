// Package images owns the fleet's root disk images: the names (in the
// inventory), the content they point to (this server's imagestore), the
// copies each server of the fleet holds, and the kernels built from the
// content. Import and Remove are the only ways in and out, and the rules
// of what must be kept live here, in one place:
//
//   - a name a profile's root uses cannot be removed (the store refuses it
//     in the same transaction, inventory.ErrConflict);
//   - content stays while any name points to it, and for Grace after an
//     import stored it, before its name is recorded;
//   - content stays while a machine of this server boots from it: a boot
//     issued on it, a connected machine, a persistent overlay made on it
//     (Boots.InUse, which package rootdisk answers);
//   - when content goes, its kernels go with it and the fleet forgets this
//     server's copy.
//
// An image is imported once, on any server, and each server holds a copy
// of its own to serve. The store's image_copies table says which server
// holds which content. A Service records what this server's data
// directory holds when it starts, on every import and every copy fetched,
// and forgets content it deletes. It fetches content it lacks from a live
// peer that holds it (package imagepeer), verified by its sha256 before
// it appears in the image store: at once when a boot needs it (Ensure;
// concurrent callers wait for one fetch), and in the background, one or
// two at a time, as soon as a new image appears in the store, so the
// first boot does not wait. A check every Interval deletes local content
// no image names any more, by the rules above: removing an image on one
// server removes it everywhere.
//
// Nothing here runs on a DHCP or TFTP hot path. Ensure costs a stat when
// the content is here. Which server holds what, for script renders, is
// membership.Holdings, read from the same table.
package images
