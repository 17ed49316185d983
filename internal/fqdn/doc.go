// Package fqdn is the codec of the client FQDN options: DHCPv4 option 81
// (RFC 4702) and DHCPv6 option 39 (RFC 4704). It decodes what a client
// sends and encodes the server's answer, which tells the client its name
// from the inventory. It has no sockets and no logging; packages dhcp and
// dhcp6 decide when to answer.
package fqdn
