package pool

// How a task's work becomes a task others can run. Every task a worker
// makes goes through spawn (into its own queues) or spawnTo (into a
// group's shard); a task that must run in another group goes there
// through sendHome. Each counts the task and wakes a worker for it when
// nobody searches (idle.notify), so no path forgets either.

// where is the place in the worker's own queues that spawn puts a task.
type where int

const (
	// inLIFO: the LIFO slot, to run next on this worker unless an idle
	// worker takes it first; the slot's previous task moves to the back
	// of the queue (Spawn, Async and Run from a task).
	inLIFO where = iota
	// atBack: the back of the queue, which thieves take from first, for
	// work the worker does not mean to run next (Group.Go, the upper
	// half of a loop piece).
	atBack
)

// spawn queues t, made by the task running on w, in w's own queues.
func (w *Worker) spawn(t *task, at where) {
	if at == inLIFO {
		t = w.lifo.Swap(t) // the previous task, if any, goes to the back
	}
	if t != nil {
		w.push(t)
	}
	w.spawned(w.group)
}

// spawnTo queues t, made by the task running on w, in group g's shard:
// pinned if t must stay in g. The shard's bound does not apply: only the
// pool's own workers make room, and w is one of them.
func (w *Worker) spawnTo(g *group, t *task) {
	w.c.Spawned++
	w.queueIn(g, t)
}

// queueFrom queues t, made by the task running on w, for group g: in
// w's LIFO slot for the whole pool (g nil), as Spawn, else in g's shard.
func (w *Worker) queueFrom(g *group, t *task) {
	if g == nil {
		w.spawn(t, inLIFO)
	} else {
		w.spawnTo(g, t)
	}
}

// spawned counts a task w made for group g's workers and wakes one of
// them if nobody searches.
func (w *Worker) spawned(g *group) {
	w.c.Spawned++
	w.pool.idle.notify(g.index)
}

// sendHome queues t, which must or should run in group g, in g's shard
// and wakes a worker of g: a strict task that w got, or a soft one whose
// node keeps up (remade false), or the rest of a loop piece that w took
// while g is still busy with it, remade as a new task (counted as spawned
// too, since the piece w took completes here).
func (w *Worker) sendHome(g *group, t *task, remade bool) {
	if remade {
		w.c.Spawned++
	}
	w.c.SentHome++
	w.sentHome(remade)
	w.queueIn(g, t)
}

// queueIn queues t, from the task running on w, in g's shard for its home
// and wakes a worker for it: only one of g's own if t must run in g
// (strict) or should (soft, sent home because g keeps up).
func (w *Worker) queueIn(g *group, t *task) {
	home := t.home // itemOf may give t back for reuse
	g.shardOf(home).Requeue(w.itemOf(t))
	if home != noHome {
		w.pool.idle.notifyOwn(g.index)
	} else {
		w.pool.idle.notify(g.index)
	}
}

// SpawnWith queues fn(w, x) as a task of w's, as w.Spawn(func(w
// *pool.Worker) { fn(w, x) }) would, but without the closure: with fn a
// function value made before (a top-level function, or a closure made
// once, not per call), it allocates nothing once the worker has run
// tasks of the same argument type, whose records it reuses. A
// closure per task costs an allocation, and a recursion that spawns a
// million tasks then spends much of its time in the garbage collector,
// whose phases also take processors from the pool's workers. A panic in
// fn goes to the pool's panic handler, as Spawn's does. Call it only from
// a task running on w.
func SpawnWith[X any](w *Worker, fn func(*Worker, X), x X) {
	if fn == nil {
		panic("pool: SpawnWith of a nil function")
	}
	w.owner.check("SpawnWith")
	t, ok := recordOf[*argTask[X]](&w.args)
	if !ok {
		t = &argTask[X]{task: task{home: noHome}}
		t.job = t
	}
	t.fn, t.x = fn, x
	w.spawn(&t.task, inLIFO)
}

// argTask is a task of SpawnWith: fn and its argument in a record of its
// own, which the worker that runs it keeps for its next SpawnWith of the
// same type.
type argTask[X any] struct {
	task
	fn func(*Worker, X)
	x  X
}

// maxArgTasks bounds a worker's list of SpawnWith records to reuse; a
// record beyond it goes to the collector.
const maxArgTasks = 256

// run takes fn and x out of the record and gives it back to w's list
// before calling fn: no queue or slot refers to a task that is running,
// and fn's own spawns of the same type then reuse it at once. Worker.run
// reads only the record's plain flag afterwards, which is never written
// after the record is made.
func (t *argTask[X]) run(w *Worker) {
	fn, x := t.fn, t.x
	var zero X
	t.fn, t.x = nil, zero
	w.args.keep(t)
	w.call(func(w *Worker) { fn(w, x) })
}

func (t *argTask[X]) drop(error) {} // dropped like a plain task: only counted
