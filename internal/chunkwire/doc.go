// Package chunkwire is the codec of bootfleet's multicast root protocol:
// the datagrams between an agent, which reads a diskless root, and the
// server that multicasts the root's shared content to every agent booting
// it. It is pure: bytes in, structs out, no sockets and no logging.
//
// Three datagrams make the protocol (data.go, request.go and announce.go
// draw each one; packet.go the header they share):
//
//   - Data, server to group: one fragment of one chunk of the content;
//   - Request, agent to server by unicast: the chunks (or fragments of
//     them) the agent wants next, its misses and its read-ahead;
//   - Announce, server to agent by unicast: the answer to a Request with
//     no ranges, which tells the agent the server knows the content and
//     where it is multicast.
//
// # Chunks and fragments
//
// The content is cut into chunks of ChunkSize (32 KiB), the unit an agent
// asks for and caches, and each chunk into FragmentsPerChunk (32)
// fragments of FragmentSize (1 KiB), one fragment per datagram. A data
// datagram is then 1056 bytes of UDP payload, which fits, with its IP and
// UDP headers, in IPv6's minimum MTU of 1280 as well as in a 1500-byte
// Ethernet frame with room for VLAN tags and tunnels, so the protocol never
// relies on IP fragmentation: a lost IP fragment loses the whole datagram,
// and multicast routers and switches handle fragments worst. A power of two
// keeps offsets shifts and puts a 4 KiB page in exactly 4 fragments. The
// chunk is larger than the fragment because requests, the cache and the
// read-ahead order work better at the size of a kernel read than of a
// packet; 32 fragments make the fragment mask of a request one 32-bit word,
// so a repair asks for exactly the fragments that were lost. The header is
// 32 bytes of 1056, and Ethernet, IP and UDP add 66 more: 1024 payload
// bytes cost 1122 on the wire (91.3 %), against 93.6 % for the largest
// payload a 1500-byte frame holds.
//
// # Integrity
//
// Every datagram carries a CRC32C (Castagnoli) over all its bytes but the
// CRC field itself, so a corrupt datagram is dropped rather than cached.
// The CRC does not authenticate: anyone on the segment can send a datagram
// that passes it. The content id in every datagram (the first 8 bytes of the
// image's sha256) keeps two contents that share a group apart.
//
// Decoders are strict: reserved bits zero, lengths exact. A datagram that
// decodes re-encodes to the same bytes, which the fuzz targets check.
package chunkwire
