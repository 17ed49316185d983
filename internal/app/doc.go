// Package app builds bootfleet's servers from a validated config and runs
// them together. The first fatal error from any server stops all of them,
// and Run returns that error.
//
// It only wires: the inventory's work (fleet view, leases, discovered
// machines, boot status) is package inventorysvc's, diskless roots are
// package diskless's, and the REST API is built once here from package
// api with the data directory's token.
package app
