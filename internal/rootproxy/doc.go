// Package rootproxy is the agent's side of a diskless root read through
// the agent: the kernel's NBD client holds one end of a unix socket pair,
// and the agent serves the other with internal/nbd's server and a Proxy
// as the export. The Proxy answers:
//
//   - reads of the base image from a bounded read cache in RAM
//     (internal/mcast's MemCache, allocated up front), filled by the
//     content's multicast group (mcast.Receiver) when there is one, by
//     unicast reads rounded out to whole chunks while the group is up, and
//     otherwise by the chunks unicast reads of what the kernel asked hold
//     whole, so a machine whose group is silent reads no more than on the
//     direct path;
//   - misses the group cannot fill (silent, lossy, no slot), every read of
//     a block the machine has written, in this boot (tracked here) or in
//     an earlier one (the server's overlay blockset given at connect), and
//     every write, by unicast NBD to the root's servers (Upstream), with
//     the same failover as the direct path: an unanswered request moves,
//     with all others in flight, to the next server.
//
// A block the machine wrote is never answered from the cache: writes mark
// their blocks before they leave and drop the cached chunks they touch.
// Without a base (a server-side overlay whose blocks the server did not
// say) the cache stays off and the proxy is a plain unicast relay.
//
// Files: upstream.go (pipelined client with failover), proxy.go (the
// export: cache, group, dirty blocks), cache.go (the cache the Receiver
// and unicast fills share), serve.go (the kernel's socket),
// memory_linux.go (what a block-device daemon must do under memory
// pressure).
package rootproxy
