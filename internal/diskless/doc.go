// Package diskless runs diskless roots for a serving bootfleet: the image
// content in the data directory and the kernels built from it, the
// per-boot NBD exports that iPXE scripts name (package rootdisk decides
// who may open which), and the NBD server that serves them.
//
// A Service is what the other servers see of it: the HTTP boot server
// asks it for a machine's root at each script render (IssueRoot) and for
// kernels of root.kernel: image profiles (Kernels); the API resets
// overlays (Reset). Package images imports and deletes the content served
// here, asking Disks which content machines still boot from.
package diskless
