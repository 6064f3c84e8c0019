package pool

// task is one unit of work in a queue: what it does, and where it may
// run. home >= 0 keeps it inside that node group (SubmitToStrict, a loop's
// node block): it is queued in the group's pinned shard, which only the
// group's workers read, and a worker of another node that gets it anyway
// (a loop piece) sends it home.
type task struct {
	job  job
	home int32  // node group index, or -1
	slot *group // the group whose bound this task holds a place in, until started
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

// release gives back the task's place under its group's bound, once.
func (t *task) release() {
	if t.slot != nil {
		<-t.slot.slots
		t.slot = nil
	}
}
