// Package ipmi is the power driver for BMCs that speak IPMI v2.0 over LAN
// (RMCP+, what ipmitool calls lanplus), with the cipher suite chosen per
// machine. The protocol is github.com/bougou/go-ipmi's; this package maps
// bootfleet's actions onto chassis control, reads the power state back
// and turns the library's errors into ones that tell the admin what to fix.
package ipmi
