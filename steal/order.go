// Package steal decides where an idle worker looks for work: the order of
// its victims. Hierarchical order keeps work inside a NUMA node: the
// worker's own node first (its workers from a random start, then the
// node's inject shard), then the other nodes nearest first by node
// distance, random among equals, each node's workers from a random start
// and then its shard. Flat order is one level over all workers, as Tokio
// does, for comparison runs.
//
// A Layout is built once per pool and is read-only afterwards, so any
// number of workers may walk it at once, each with its own Rand.
package steal

import (
	"fmt"
	"slices"
	"strings"
)

// Mode selects the victim order.
type Mode int

const (
	// Hierarchical: own node first, then other nodes by distance.
	Hierarchical Mode = iota
	// Flat: all workers as one level, as Tokio.
	Flat
)

func (m Mode) String() string {
	switch m {
	case Hierarchical:
		return "hierarchical"
	case Flat:
		return "flat"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses "hierarchical" or "flat".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "hierarchical":
		return Hierarchical, nil
	case "flat":
		return Flat, nil
	}
	return 0, fmt.Errorf("steal: unknown mode %q (want hierarchical or flat)", s)
}

// Victim is a place to steal from: a worker's ring, or a domain's inject
// shard (Worker == -1). A domain is the pool's part on one node: its
// workers and its shards.
type Victim struct {
	Domain int // the pool's domain index (0..len(domains)-1), not an OS node ID
	Worker int // worker index, or -1 for the node's inject shard
}

// IsShard reports whether v is a node's inject shard.
func (v Victim) IsShard() bool { return v.Worker < 0 }

// Layout is the pool's shape as victim order sees it.
type Layout struct {
	nodes   [][]int   // domain -> its workers' indexes
	nodeOf  []int     // worker -> domain
	tiers   [][][]int // domain -> the other domains by distance: tiers of equals, nearest first
	nearest [][]int   // domain -> itself, then the tiers in order
	all     []int     // every worker, for flat order
}

// NewLayout describes a pool: nodes[g] lists the worker indexes of
// domain g (indexes 0..n-1, each once), distance(a, b) the distance
// between domains a and b.
func NewLayout(nodes [][]int, distance func(a, b int) int) (*Layout, error) {
	l := &Layout{nodes: nodes}
	total := 0
	for _, ws := range nodes {
		total += len(ws)
	}
	l.nodeOf = make([]int, total)
	seen := make([]bool, total)
	for g, ws := range nodes {
		for _, w := range ws {
			if w < 0 || w >= total || seen[w] {
				return nil, fmt.Errorf("steal: worker %d in domain %d is out of range or listed twice", w, g)
			}
			seen[w] = true
			l.nodeOf[w] = g
			l.all = append(l.all, w)
		}
	}
	for g := range nodes {
		var others []int
		for o := range nodes {
			if o != g {
				others = append(others, o)
			}
		}
		slices.SortStableFunc(others, func(a, b int) int { return distance(g, a) - distance(g, b) })
		var tiers [][]int
		for i, o := range others {
			if i == 0 || distance(g, o) != distance(g, others[i-1]) {
				tiers = append(tiers, nil)
			}
			tiers[len(tiers)-1] = append(tiers[len(tiers)-1], o)
		}
		l.tiers = append(l.tiers, tiers)
		l.nearest = append(l.nearest, append([]int{g}, others...))
	}
	return l, nil
}

// Nearest returns domain g followed by the other domains, nearest first
// (equals in index order): the order a wake-up for g's work looks for a
// sleeper in. The slice is the layout's; the caller must not change it.
func (l *Layout) Nearest(g int) []int { return l.nearest[g] }

// Local visits, in order, the victims of worker self inside its own node:
// the node's other workers from a random start, then the node's inject
// shard. visit returns true to stop; Local reports whether it stopped.
func (l *Layout) Local(self int, r *Rand, visit func(Victim) bool) bool {
	g := l.nodeOf[self]
	if l.visitWorkers(l.nodes[g], self, r, visit) {
		return true
	}
	return visit(Victim{Domain: g, Worker: -1})
}

// Remote visits the victims in the other nodes, nearest first, random
// among nodes at equal distance; in each node its workers from a random
// start and then its shard.
func (l *Layout) Remote(self int, r *Rand, visit func(Victim) bool) bool {
	var order [8]int
	for _, tier := range l.tiers[l.nodeOf[self]] {
		nodes := append(order[:0], tier...)
		shuffle(nodes, r)
		for _, g := range nodes {
			if l.visitWorkers(l.nodes[g], self, r, visit) || visit(Victim{Domain: g, Worker: -1}) {
				return true
			}
		}
	}
	return false
}

// Flat visits every other worker from a random start, then the worker's
// own node's shard, then the other shards from a random start.
func (l *Layout) Flat(self int, r *Rand, visit func(Victim) bool) bool {
	if l.visitWorkers(l.all, self, r, visit) {
		return true
	}
	g := l.nodeOf[self]
	if visit(Victim{Domain: g, Worker: -1}) {
		return true
	}
	n := len(l.nodes)
	start := r.Intn(n)
	for i := range n {
		o := (start + i) % n
		if o != g && visit(Victim{Domain: o, Worker: -1}) {
			return true
		}
	}
	return false
}

// visitWorkers visits ws except self, from a random start (or in a random
// permutation under the race detector).
func (l *Layout) visitWorkers(ws []int, self int, r *Rand, visit func(Victim) bool) bool {
	n := len(ws)
	if n == 0 {
		return false
	}
	if shuffleHard {
		perm := slices.Clone(ws)
		shuffle(perm, r)
		ws = perm
	}
	start := r.Intn(n)
	for i := range n {
		w := ws[(start+i)%n]
		if w == self {
			continue
		}
		if visit(Victim{Domain: l.nodeOf[w], Worker: w}) {
			return true
		}
	}
	return false
}

// shuffle permutes s in place (Fisher-Yates).
func shuffle(s []int, r *Rand) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.Intn(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}
