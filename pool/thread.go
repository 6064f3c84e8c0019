package pool

// The worker's thread (placement's Thread, internal/place). A worker's
// goroutine is locked to an OS thread bound to its CPUs (unless
// pin.Goroutines), and two things a task does could take that thread
// away:
//
//   - runtime.UnlockOSThread without a matching LockOSThread would unlock
//     the worker's goroutine, which would then run on whatever thread the
//     runtime gives it while its bound thread ran other goroutines. The
//     worker locks its thread many times over (place.LockSlack), so a
//     task's unpaired unlocks leave it locked; and at its stop points (a
//     wake-up, every place.SpreadEvery tasks: settle) it checks that it
//     still runs on its thread, and if a task unlocked it past the
//     slack, it locks and binds the thread it is on, puts the deserted
//     thread's mask back and counts it (Counters.Relocks).
//   - runtime.Goexit ends the worker's goroutine, and with it, since it
//     is locked, its thread. The waiters of the tasks on its stack are told
//     (panic.go); the worker then goes on in a new goroutine, which locks
//     and binds a new thread (replace) and keeps the worker's ID, queue,
//     LIFO slot and counters, and takes the join slot's offer into its
//     queue: the Join that offered it has ended and will not take it back.
//     Counted in Counters.Goexits.

// end is the worker's last act: publish, let a waker's aim finish, put
// the thread's mask back.
func (w *Worker) end() {
	defer w.pool.workerEnded() // after the mask is put back
	w.publish()
	w.owner.ended.Store(true)
	w.th.End()
	// Return still locked, if locked: the runtime ends this thread with
	// the goroutine.
}

// replace runs as a task's runtime.Goexit ends the worker's goroutine,
// after every deferred call of the tasks on its stack: it hands the
// worker on to a new goroutine (see above). Still the owner here.
func (w *Worker) replace() {
	w.c.Goexits++
	if w.seek.searching {
		w.endSearch()
	}
	if t := w.joinSlot.Swap(nil); t != nil {
		w.push(t)
	}
	w.publish()
	w.pool.byG.move(w, w.owner.g.Swap(0), 0)
	w.th.Desert()
	go w.main(nil)
	// This goroutine ends now; locked, it takes its thread with it.
}

// settle is what a worker does at its stop points, after a wake-up and
// every place.SpreadEvery tasks: it checks its thread, takes up a
// re-plan, then checks its CPU (place's spreading).
func (w *Worker) settle() {
	if relocked, err := w.th.KeepThread(); relocked {
		if err != nil {
			w.pool.noteDegraded(err)
		}
		w.c.Relocks++
	}
	if w.th.Follow() {
		w.c.Replans++
	}
	if w.th.Spread() {
		w.c.Spreads++
	}
}
