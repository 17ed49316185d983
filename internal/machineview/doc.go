// Package machineview is the in-memory view of machines and profiles
// that the hot paths (DHCP, HTTP scripts) consult. Lookups never touch
// disk; a replacement view is swapped in atomically, so a change is live
// on the next request without a restart.
package machineview
