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
	g.shardOf(t.home).Requeue(w.itemOf(t))
	w.spawned(g)
}

// spawned counts a task w made for group g's workers and wakes one of
// them if nobody searches.
func (w *Worker) spawned(g *group) {
	w.c.Spawned++
	w.pool.idle.notify(g.index)
}

// sendHome queues t, which must run in group g, in g's shard and wakes a
// worker of g: a strict task that w got (remade false), or the rest of a
// loop piece that w took while g is still busy with it, remade as a new
// task (counted as spawned too, since the piece w took completes here).
func (w *Worker) sendHome(g *group, t *task, remade bool) {
	if remade {
		w.c.Spawned++
	}
	w.c.SentHome++
	g.shardOf(t.home).Requeue(w.itemOf(t))
	w.pool.idle.notify(g.index)
}
