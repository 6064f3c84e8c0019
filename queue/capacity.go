//go:build !numapool_smallqueue

package queue

// Capacity is the number of slots of a Local ring: a power of two, so that
// an index maps to its slot with a mask. Build with -tags
// numapool_smallqueue to shrink it to 4, as Tokio does under loom, so
// that tests reach wrap-around, overflow and concurrent steals in a few
// steps.
const Capacity = 256

// segmentSlots is the size of the blocks an inject shard's FIFO is made
// of (inject.go). The numapool_smallqueue build shrinks it to 4, so that
// tests cross a block boundary every few tasks.
const segmentSlots = 256
