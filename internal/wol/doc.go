// Package wol is the Wake-on-LAN magic packet: its codec (magic.go: bytes
// in, struct out, no sockets) and a sender that broadcasts it over UDP on
// one interface or to a subnet-directed broadcast address (send.go). Which
// machine to wake, and when, is package power's business.
package wol
