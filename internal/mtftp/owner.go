package mtftp

import (
	"sync"
	"time"
)

// Lapse is how long a file keeps the group after its last renewal (a
// script granted, an RRQ, the carousel's last DATA). It is longer than any
// iPXE listens: it gives up after 4 silent timeouts of at most 10 s.
const Lapse = 60 * time.Second

// MaxSize is the largest file served: iPXE extends 16-bit block numbers
// from its first missing block, which is only sound below 65535 blocks of
// 512 bytes.
const MaxSize = 65535*BlockSize - 1

// BlockSize is MTFTP's block size: the RRQ carries no blksize option.
const BlockSize = 512

// owner holds the group for one file at a time.
type owner struct {
	mu    sync.Mutex
	now   func() time.Time
	path  string
	until time.Time
	busy  bool // the carousel is sending path: it holds the group however long that takes
}

// grant makes path the owner, or renews it, unless another file holds
// the group.
func (o *owner) grant(path string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if path != o.path && (o.busy || now.Before(o.until)) {
		return false
	}
	o.path, o.until = path, now.Add(Lapse)
	return true
}

// sending marks whether the carousel is sending the owner; when it stops
// the lapse starts again, from the last DATA a client may have heard.
func (o *owner) sending(busy bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.busy = busy
	if !busy {
		o.until = o.now().Add(Lapse)
	}
}
