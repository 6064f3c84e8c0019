//go:build numapool_smallqueue

package queue

// Capacity is 4 in the numapool_smallqueue build: see capacity.go.
const Capacity = 4

// segmentSlots is 4 in the numapool_smallqueue build: see capacity.go.
const segmentSlots = 4
