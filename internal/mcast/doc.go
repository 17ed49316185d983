// Package mcast moves a diskless root's shared content to many agents at
// once: the server's Sender multicasts each chunk agents ask for, once
// however many asked, and each agent's Receiver assembles the chunks it
// wants (and those others asked for) into a bounded cache. The datagrams
// are internal/chunkwire's; the group comes from internal/mcastgroup.
//
// The protocol is receiver-driven, so a lost datagram costs one repair
// rather than a retransmission to everyone, and an agent that hears
// nothing falls back to unicast on its own:
//
//   - an agent sends a hello, then Requests by unicast: its misses and its
//     read-ahead, as chunk ranges with fragment masks;
//   - the Sender queues each asked-for chunk once: a request for a chunk
//     already queued merges into it, and one for fragments sent less than
//     SenderConfig.Suppress ago is dropped, since they are still on their
//     way to the agent that asked (a repair, FlagRepair, is never dropped);
//   - the Sender paces its datagrams with a token bucket to
//     SenderConfig.Rate, counted in bytes on the wire, and sends with TTL 1
//     unless told otherwise;
//   - the Receiver checks every datagram's CRC and content, counts gaps in
//     each sender's sequence numbers as losses (two servers of a fleet may
//     send one content to one group), and asks again for what is missing
//     as soon as that sender has moved past a chunk (FlagEnd, or a
//     datagram of another chunk), or RepairAfter after the last progress;
//   - a receiver that reads its socket late (a busy machine) judges what
//     did not arrive on the clock of what it has read, by the kernel's
//     arrival stamps, and holds the requests of chunks wanted while
//     datagrams wait unread until it has read them: else it would ask for
//     what waits in its own socket, and the server would send it again to
//     every machine;
//   - a chunk asked for more than MaxRepairs times fails with ErrLossy; a
//     receiver that loses more than MaxLoss of the group, or has had no
//     datagram within Silence of wanting one (ErrSilent), gives the group
//     up and fails every wait from then on. The caller reads those by
//     unicast, so a lossy, slow or cut-off agent falls back alone and its
//     repairs stop costing the others.
//
// Files: sender.go (request loop, paced send), queue.go (merging and
// suppression), receiver.go (sockets, requests), assembly.go (chunks,
// repair, silence), backlog.go (requests held while datagrams wait
// unread), stream.go (per-sender sequence, loss), cache.go (MemCache,
// preallocated chunk slots), pacer.go (token bucket), socket.go (sockets
// with their multicast options and arrival stamps).
package mcast
