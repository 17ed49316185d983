package mtftp

// carousel is the send order of one file: blocks 1..blocks round and
// round from next, while a cycle is owed.
type carousel struct {
	blocks int // DATA blocks of the file: the last one short, maybe empty
	next   int // the block to send next, 1-based
	left   int // blocks still owed: a full cycle from the latest RRQ
	sent   int // blocks sent since the last full cycle ended
	cycles uint64
}

// blocksOf is how many DATA blocks a file of size bytes takes: a file
// that is a whole number of blocks ends with an empty one, which tells
// the client the size.
func blocksOf(size int64) int { return int(size/BlockSize) + 1 }

func newCarousel(size int64) carousel {
	return carousel{blocks: blocksOf(size), next: 1}
}

// want owes a full cycle from here. A request mid-cycle extends the
// cycle rather than queueing another: one cycle from now covers both.
func (c *carousel) want() { c.left = c.blocks }

// take is the block to send next; false when no cycle is owed.
func (c *carousel) take() (int, bool) {
	if c.left == 0 {
		return 0, false
	}
	b := c.next
	c.next = c.next%c.blocks + 1
	c.left--
	if c.sent++; c.sent == c.blocks {
		c.sent = 0
		c.cycles++
	}
	return b, true
}
