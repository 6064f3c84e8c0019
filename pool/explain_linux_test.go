package pool

import (
	"fmt"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
	"golang.org/x/sys/unix"
)

// Explain reports each worker's thread and the mask the kernel holds for
// it, not the plan's: a mask narrowed from outside (taskset -p) shows,
// with what the pool bound the thread to.
func TestExplainReadsTheThreadsMasks(t *testing.T) {
	p := newTestPool(t, WithWorkers(1), WithBinding(pin.NUMADomains))
	defer p.Close()
	w := p.workers[0]
	tid := w.th.TID()
	if tid == 0 || w.th.Bound().Len() < 2 {
		t.Skipf("worker thread %d bound to %s: needs a thread on two CPUs", tid, w.th.Bound())
	}
	ex := p.Explain()
	if want := fmt.Sprintf("worker 0: thread %d, mask %s;", tid, w.th.Bound()); !strings.Contains(ex, want) {
		t.Fatalf("Explain does not say %q:\n%s", want, ex)
	}
	var one unix.CPUSet
	one.Set(w.th.Bound().First())
	if err := unix.SchedSetaffinity(tid, &one); err != nil {
		t.Skip(err)
	}
	ex = p.Explain()
	want := fmt.Sprintf("worker 0: thread %d, mask %d (the pool bound it to %s)", tid, w.th.Bound().First(), w.th.Bound())
	if !strings.Contains(ex, want) {
		t.Errorf("after narrowing the thread, Explain does not say %q:\n%s", want, ex)
	}
}
