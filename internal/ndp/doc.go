// Package ndp answers IPv6 router solicitations on the boot network so that
// iPXE does not wait for a router that does not exist.
//
// iPXE configures a NIC by running all its configurators and waiting for the
// last one. Its IPv6 configurator sends router solicitations (RFC 4861
// section 6.3.7) and only finishes when a router advertisement arrives or
// after about 16 s; on an IPv4-only lab network nothing answers, and every
// boot stalls about 13 s between the DHCP ACK and the script download. A bare
// advertisement (router lifetime 0, no prefixes, M=O=0) ends that wait and
// tells every host that we are not a router, so no host changes its routes.
//
// The package has the house's three layers:
//
//   - codec (message.go): router solicitations and advertisements (RFC 4861
//     sections 4.1 and 4.2) and their options, bytes to structs and back;
//   - transport (server.go, socket_linux.go): an ICMPv6 raw socket bound to
//     the DHCP interface, joined to ff02::2, sending with hop limit 255 from
//     the interface's link-local address and dropping what RFC 4861 section
//     6.1 says a router must drop;
//   - policy (policy.go): stay silent while another router is on the link,
//     answer a solicitation only after real routers had time to, and limit
//     the rate of answers.
//
// The feature is optional: without IPv6 or a link-local address on the
// interface it logs one warning and does nothing.
package ndp
