// Package ipxe renders iPXE boot scripts and kernel command lines from
// profiles. It only renders text: which machine gets which profile, and
// where the files are served, is decided by its callers.
package ipxe
