// Package observe holds the mechanisms a pool observes its tasks with:
// pprof label sets, interned per pool and merged once per worker with
// the worker's own labels (Set, Cache); the histograms of queue wait and
// run time in doubling buckets, counted by their worker and published
// for Stats (Durations, Latencies); and trace tasks (Task). What the pool
// labels and samples, and why, is argued in the pool's labels.go and
// histogram.go.
package observe
