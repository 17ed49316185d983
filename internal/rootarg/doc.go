// Package rootarg owns the value of bootfleet.root= on a diskless
// machine's kernel command line: the NBD export its root file system
// lives on and the servers that serve it, in the order to try them
// (nbd:HOST:PORT[,HOST:PORT...]:EXPORT), and of bootfleet.mcast=, the
// multicast group its base content is streamed on (mcast.go).
//
// It is pure: strings in, values out, fuzzed from testdata/fuzz. The
// server writes the value (diskless), the agent in the initramfs reads it
// to dial its root, and the storm simulator reads it to replay a boot's
// NBD reads.
package rootarg
