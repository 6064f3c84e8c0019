//go:build !numapool_smallqueue

package queue

// Capacity is the number of slots of a Local ring: a power of two, so that
// an index maps to its slot with a mask. Build with -tags
// numapool_smallqueue to shrink it to 4, as Tokio does under loom, so
// that tests reach wrap-around, overflow and concurrent steals in a few
// steps.
const Capacity = 256
