// Package mtftp serves files by PXE MTFTP, the multicast scheme iPXE
// fetches as mtftp://SERVER/PATH: the client sends a plain RRQ (no
// options, 512-byte blocks) to the server's MTFTP port and listens on one
// group and port (239.255.1.1:3001 in iPXE, fixed at build time) for
// DATA, in any order, until it holds every block.
//
// Every iPXE listens on the same group for every mtftp file, and takes
// the first DATA it hears as its file's, so the group may carry one file
// at a time: the owner (owner.go). A script may name mtftp:// for a file
// only when Grant says it owns the group; RRQs for any other file are
// answered with a TFTP ERROR, which makes iPXE take the script's next URL.
//
// The owner is sent as a carousel (carousel.go): each RRQ owes one full
// cycle of its blocks from wherever the carousel is, so a client that
// asked at time t gets every block sent after t. Nobody ACKs: a client
// that lost blocks times out, asks again and gets another cycle. The
// carousel is paced (mcast.Pacer) so it never floods the link.
//
// The transport (server.go) has two sockets: the request socket on the
// MTFTP port, and one data socket with a fixed port, from which every
// DATA goes to the group and every ERROR to its client.
package mtftp
