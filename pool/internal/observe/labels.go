package observe

import (
	"context"
	"reflect"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Label keys a pool sets on every task.
const (
	LabelNode   = "numapool.node"
	LabelWorker = "numapool.worker"
)

// maxSets bounds the label sets a Cache interns: sets beyond it (a label
// per request, say) are not kept, and their tasks merge labels each time
// they start, an allocation per task.
const maxSets = 4096

// Set is one set of pprof labels that tasks run under, beside their
// worker's own. merged holds, per worker ID, the set merged with that
// worker's labels, as the context SetGoroutineLabels takes; only that
// worker reads or writes its entry. A set not interned (merged nil) is
// merged each time.
type Set struct {
	pairs  []string // key, value, ...; as pprof.ForLabels gives them (sorted by key)
	merged []context.Context
}

// Pairs returns the set's keys and values, key first, sorted by key.
func (s *Set) Pairs() []string { return s.pairs }

// Cache interns a pool's label sets. last is the context the last
// submission with labels came with and its set: submissions in a row
// under the same context (a loop of Submit inside one pprof.Do) find
// their set without walking the context.
type Cache struct {
	last atomic.Pointer[ctxSet]
	mu   sync.Mutex
	sets map[string]*Set
}

type ctxSet struct {
	ctx context.Context
	set *Set
}

// The dynamic types of context.Background and context.TODO.
var (
	backgroundType = reflect.TypeOf(context.Background())
	todoType       = reflect.TypeOf(context.TODO())
)

// Of returns the label set of ctx for tasks of a pool of workers, or nil
// if ctx has no pprof labels.
func (c *Cache) Of(ctx context.Context, workers int) *Set {
	// Most submissions pass context.Background, which holds no labels: its
	// dynamic type says so at the cost of a load and a comparison (an
	// interface comparison with Background would call the runtime, and a
	// Value lookup is an indirect call).
	if ctx == nil {
		return nil
	}
	if t := reflect.TypeOf(ctx); t == backgroundType || t == todoType {
		return nil
	}
	labelled := false
	pprof.ForLabels(ctx, func(string, string) bool { labelled = true; return false })
	if !labelled {
		return nil
	}
	if l := c.last.Load(); l != nil && l.ctx == ctx {
		return l.set
	}
	var pairs []string
	pprof.ForLabels(ctx, func(k, v string) bool {
		pairs = append(pairs, k, v)
		return true
	})
	if len(pairs) == 0 {
		return nil
	}
	set := c.intern(pairs, workers)
	c.last.Store(&ctxSet{ctx: ctx, set: set})
	return set
}

// intern returns the cache's set equal to pairs, made if new.
func (c *Cache) intern(pairs []string, workers int) *Set {
	key := strings.Join(pairs, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sets[key]; ok {
		return s
	}
	s := &Set{pairs: pairs}
	if len(c.sets) < maxSets {
		if c.sets == nil {
			c.sets = make(map[string]*Set)
		}
		s.merged = make([]context.Context, workers)
		c.sets[key] = s
	}
	return s
}

// Own is the labels of worker id of node: its own, which its goroutine
// runs under between tasks.
func Own(node, id int) context.Context {
	return pprof.WithLabels(context.Background(), pprof.Labels(LabelNode, strconv.Itoa(node), LabelWorker, strconv.Itoa(id)))
}

// For is the context worker id of node runs a task of set s under: s
// merged with the worker's own labels (own, for a nil s). The worker's
// keys win over a set's equal keys. Only worker id calls it for id.
func (s *Set) For(node, id int, own context.Context) context.Context {
	if s == nil {
		return own
	}
	if s.merged != nil && id < len(s.merged) {
		if ctx := s.merged[id]; ctx != nil {
			return ctx
		}
	}
	ctx := pprof.WithLabels(context.Background(), pprof.Labels(s.pairs...))
	ctx = pprof.WithLabels(ctx, pprof.Labels(LabelNode, strconv.Itoa(node), LabelWorker, strconv.Itoa(id)))
	if s.merged != nil && id < len(s.merged) {
		s.merged[id] = ctx
	}
	return ctx
}
