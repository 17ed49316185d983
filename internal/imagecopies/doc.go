// Package imagecopies keeps this server's image content in step with its
// fleet, the servers that share one store: an image is imported once, on
// any server, and each server holds a copy of its own to serve.
//
// The store's image_copies table says which server holds which content.
// A Service records what this server's data directory holds when it
// starts, on every import and every copy fetched, and forgets content it
// deletes. It fetches content it lacks from a live peer that holds it
// (package imagepeer), verified by its sha256 before it appears in the
// image store: at once when a boot needs it (Ensure; concurrent callers
// wait for one fetch), and in the background, one or two at a time, as
// soon as a new image appears in the store, so the first boot does not
// wait. A check every Interval deletes local content no image names any
// more, once no machine of this server still boots from it: removing an
// image on one server removes it everywhere.
//
// Nothing here runs on a DHCP or TFTP hot path. Ensure costs a stat when
// the content is here. Which server holds what, for script renders, is
// fleetservers.Holdings, read from the same table.
package imagecopies
