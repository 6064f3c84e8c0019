package pool

import (
	"sync"

	"github.com/numapool/numapool/pool/internal/observe"
)

// task is one unit of work in a queue: what it does, and where it may
// run (its home, soft.go). A strict home keeps it inside that domain
// (a Strict Node, a loop's node block): it is queued in the domain's
// pinned shard, which only the domain's workers read, and a worker of
// another node that gets it anyway (a loop piece) sends it home. noHome
// lets it run anywhere; a soft Node's task prefers its domain: other
// nodes leave it to that domain while the domain keeps up.
type task struct {
	job  job
	home home
	// plain marks a record of its own (Submit, Spawn), which the worker
	// that ran it may reuse; other tasks are embedded in their job.
	plain   bool
	placeIn *domain // the domain whose shard bound this task holds a place under, until started
	// labels are the pprof labels the task runs under beside its
	// worker's (labels.go); nil: none. at is its submit time on the
	// pool's clock if it was sampled for the queue wait and run time
	// histograms (histogram.go); 0: not sampled.
	labels *observe.Set
	at     int64
}

// item is how a worker's run queue and a node's shard hold a task. A
// plain task that holds no place under the shard bound is kept as its
// function and home, without its record: a spawned task that moves to
// the back of a queue gives its record back at once, a backlog of a
// million spawned tasks costs a slot per task and no record, and a Submit
// from outside allocates nothing. Any other task is kept as its record
// (t), and so is one with labels or a submit time (task.labels, task.at),
// which the function alone would lose; home is the task's home either
// way. The zero item is no task.
type item struct {
	t    *task
	fn   func(*Worker)
	home home
}

// none reports whether it is the zero item: no task.
func (it item) none() bool { return it.t == nil && it.fn == nil }

// recorded is it queued as its record: a task from outside the pool that
// carries more than its function (a place under the bound, a submit
// time, labels). A new record, not a worker's: the caller is no worker.
func (it item) recorded() item {
	if it.t == nil {
		it.t = &task{job: fnJob(it.fn), home: it.home, plain: true}
		it.fn = nil
	}
	return it
}

// itemOf is the item for t, made by the task running on w (or taken from
// one of w's slots); a plain record is given back for reuse.
func (w *Worker) itemOf(t *task) item {
	if t.plain && t.placeIn == nil && t.labels == nil && t.at == 0 {
		it := item{fn: t.job.(fnJob), home: t.home}
		w.reuse(t)
		return it
	}
	return t.item()
}

// item is t queued as its record.
func (t *task) item() item { return item{t: t, home: t.home} }

// taken is what a worker does to an item it takes from a shard: a record
// gives back its place under the shard's bound.
func (it item) taken() item {
	if it.t != nil {
		it.t.release()
	}
	return it
}

// records is a worker's list of typed records to reuse (Fork's b sides,
// SpawnWith's tasks), of whatever types it met, up to a bound.
type records struct {
	list []any
	max  int
}

// recordOf takes the last record off rs if it is an R (a recursion uses
// the same types at every level); ok reports whether it was.
func recordOf[R any](rs *records) (r R, ok bool) {
	n := len(rs.list)
	if n == 0 {
		return r, false
	}
	if r, ok = rs.list[n-1].(R); ok {
		rs.list[n-1] = nil
		rs.list = rs.list[:n-1]
	}
	return r, ok
}

// keep puts a cleared record on rs, or leaves it to the collector when
// rs is full.
func (rs *records) keep(r any) {
	if len(rs.list) < rs.max {
		rs.list = append(rs.list, r)
	}
}

// job is what a task does. Exactly one of run and drop is called, once:
// run on a worker, or drop when a Shutdown gives up before the task
// started. Both complete whoever waits for the task.
type job interface {
	run(w *Worker)
	drop(cause error)
}

// fnJob is a plain task (Submit, Spawn): nobody waits for it, its panic
// goes to the pool's handler, and dropping it only counts it. A func
// value fits in an interface without an allocation.
type fnJob func(*Worker)

func (f fnJob) run(w *Worker) { w.call(f) }

func (fnJob) drop(error) {}

// release gives back the task's place under its domain's bound, once.
func (t *task) release() {
	if t.placeIn != nil {
		<-t.placeIn.places
		t.placeIn = nil
	}
}

// Task records are reused, as Tokio and Go's runtime reuse theirs, so
// that a task costs no allocation once the pool has warmed up. A worker
// keeps the records of the plain tasks it ran (Submit, Spawn) and makes
// new tasks from them. Records flow from the worker that makes tasks to
// those that run them, so the workers' lists are balanced in batches
// through the pool's stash: a worker with a full list gives a batch
// away, one with an empty list takes one. A record is reused only once
// its job has returned on the worker that ran it: no queue or slot
// refers to it then.
const (
	freeBatch = 128 // records in a batch; a worker keeps up to two
	maxStash  = 64  // full batches the stash keeps; more go to the GC
	slabTasks = 32  // records allocated at once
)

type taskBatch [freeBatch]*task

// stash holds the batches of records that workers gave away, and empty
// batches to fill. A worker visits it once per freeBatch tasks.
type stash struct {
	mu    sync.Mutex
	full  []*taskBatch
	empty []*taskBatch
}

// newTask returns a plain task record for fn.
func (w *Worker) newTask(fn func(*Worker), h home) *task {
	if len(w.recs.free) == 0 {
		w.pool.stash.take(w)
	}
	if n := len(w.recs.free); n > 0 {
		t := w.recs.free[n-1]
		w.recs.free = w.recs.free[:n-1]
		t.job, t.home, t.labels = fnJob(fn), h, nil // a record keeps its last labels until reused
		return t
	}
	return w.allocTasks(fn, h)
}

// allocTasks makes records a slab at a time, when neither the worker nor
// the stash has one: tasks that wait in a slot, or carry a home, need a
// record each, and one allocation of many costs less than many of one.
func (w *Worker) allocTasks(fn func(*Worker), h home) *task {
	slab := new([slabTasks]task)
	for i := range slab[1:] {
		t := &slab[1+i]
		t.plain = true
		w.recs.free = append(w.recs.free, t)
	}
	t := &slab[0]
	t.job, t.home, t.plain = fnJob(fn), h, true
	return t
}

// recycler holds a worker's task records to reuse (owner only).
type recycler struct {
	free  []*task     // plain task records (newTask); grown at use, since most of a large pool's workers may never make a task
	joins []*joinTask // Join records (joinTask)
	forks records     // Fork records, of any Fork's types (forkRecord)
	args  records     // SpawnWith records, of any argument type
}

// reuse keeps a plain task record that has run, for newTask, which
// clears its labels: reuse runs after every task, and must stay small
// enough to be inlined.
func (w *Worker) reuse(t *task) {
	t.job = nil
	if len(w.recs.free) == 2*freeBatch {
		w.pool.stash.give(w)
	}
	w.recs.free = append(w.recs.free, t)
}

// give moves the upper half of w's free list to the stash.
func (s *stash) give(w *Worker) {
	half := w.recs.free[freeBatch:]
	s.mu.Lock()
	if len(s.full) < maxStash {
		var b *taskBatch
		if n := len(s.empty); n > 0 {
			b, s.empty = s.empty[n-1], s.empty[:n-1]
		} else {
			b = new(taskBatch)
		}
		copy(b[:], half)
		s.full = append(s.full, b)
	}
	s.mu.Unlock()
	clear(half)
	w.recs.free = w.recs.free[:freeBatch]
}

// take fills w's empty free list from the stash, if it has a batch.
func (s *stash) take(w *Worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.full)
	if n == 0 {
		return
	}
	b := s.full[n-1]
	s.full = s.full[:n-1]
	w.recs.free = append(w.recs.free, b[:]...)
	clear(b[:])
	s.empty = append(s.empty, b)
}

// maxForkRecords bounds a worker's list of Fork records to reuse: it
// grows with the nesting of Forks whose b a thief runs, and holds records
// of whatever Fork types the worker saw last.
const maxForkRecords = 64

// maxArgTasks bounds a worker's list of SpawnWith records to reuse; a
// record beyond it goes to the collector.
const maxArgTasks = 256

// catch runs fn on w and returns its panic as a *PanicError. If fn ends
// by runtime.Goexit, catch does not return: the caller's deferred calls
// complete its waiter.
func catch(w *Worker, fn func(*Worker)) (err error) {
	returned := false
	defer func() {
		if !returned {
			if perr := w.panicked(recover()); perr != nil {
				err = perr
			}
		}
	}()
	fn(w)
	returned = true
	return nil
}

// call runs a plain task's function, recovering a panic: the worker
// lives on.
func (w *Worker) call(fn func(*Worker)) {
	returned := false
	defer func() {
		if !returned {
			if perr := w.panicked(recover()); perr != nil {
				w.pool.taskPanicked(perr.Value, perr.Stack)
			}
		}
	}()
	fn(w)
	returned = true
}

// home is where a task belongs: nowhere in particular (noHome), one
// domain it must run in (strictHome: a Strict Node, a loop's node block),
// or one it prefers (preferHome: a soft Node). It is one int32, so that
// a queue item stays small: d >= 0 must run in domain d, -1 is noHome,
// and -2-d prefers domain d.
type home int32

// noHome is the home of a task that may run anywhere.
const noHome home = -1

// strictHome is the home of a task that must run in domain d.
func strictHome(d int) home { return home(d) }

// preferHome is the home of a task that prefers domain d.
func preferHome(d int) home { return noHome - 1 - home(d) }

// strict reports whether the task must run in its domain.
func (h home) strict() bool { return h >= 0 }

// domain is the index of the domain a task must or should run in; h is not
// noHome.
func (h home) domain() int {
	if h >= 0 {
		return int(h)
	}
	return int(noHome - 1 - h)
}
