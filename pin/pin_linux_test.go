package pin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapool/numapool/topology"
)

// allowedCPUs returns the CPUs this test process may use.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	set, err := topology.ThreadAffinity(0)
	if err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	return set.List()
}

// inThread runs f on a fresh goroutine and waits for it.
func inThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestLockRunsOnlyOnItsCPU(t *testing.T) {
	for _, cpu := range allowedCPUs(t) {
		t.Run(fmt.Sprint("cpu", cpu), func(t *testing.T) {
			var seen []int
			var lockErr, restoreErr error
			inThread(func() {
				th, err := Lock(topology.NewCPUSet(cpu))
				if err != nil {
					lockErr = err
					return
				}
				defer func() { restoreErr = th.Restore() }()
				for i := range 2000 {
					c, _, err := CurrentCPU()
					if err != nil {
						lockErr = err
						return
					}
					if c != cpu {
						seen = append(seen, c)
					}
					if i%100 == 0 {
						time.Sleep(time.Microsecond) // give the scheduler a chance to move us
					}
				}
			})
			if lockErr != nil || restoreErr != nil {
				t.Fatal(lockErr, restoreErr)
			}
			if len(seen) > 0 {
				t.Errorf("pinned to CPU %d but ran on %v", cpu, seen)
			}
		})
	}
}

// CurrentCPU, from its register or from getcpu, names the CPU and the
// node of a thread pinned to one CPU, each allowed CPU in turn, and so
// does getcpu itself: the register is read only where it agrees.
func TestCurrentCPUNamesThePinnedCPU(t *testing.T) {
	nodeOf := map[int]int{}
	for _, n := range topology.Discover().Nodes {
		for _, c := range n.CPUs.List() {
			nodeOf[c] = n.ID
		}
	}
	fast := auxOK.get(auxTrusted)
	t.Logf("the CPU's register read: %v", fast)
	for _, cpu := range allowedCPUs(t) {
		var errs []error
		inThread(func() {
			th, err := Lock(topology.NewCPUSet(cpu))
			if err != nil {
				errs = append(errs, err)
				return
			}
			defer func() { _ = th.Restore() }()
			for _, ask := range []struct {
				name string
				f    func() (int, int, error)
			}{{"CurrentCPU", CurrentCPU}, {"getcpu", getcpu}} {
				c, n, err := ask.f()
				want, known := nodeOf[cpu]
				switch {
				case err != nil:
					errs = append(errs, err)
				case c != cpu || known && n != want:
					errs = append(errs, fmt.Errorf("%s on a thread pinned to CPU %d (node %d) = CPU %d, node %d", ask.name, cpu, want, c, n))
				}
			}
			if c, n, ok := fastCPU(); ok != fast || ok && (c != cpu || n != nodeOf[cpu]) {
				errs = append(errs, fmt.Errorf("the register on CPU %d: CPU %d, node %d, read %v (trusted: %v)", cpu, c, n, ok, fast))
			}
		})
		for _, err := range errs {
			t.Error(err)
		}
	}
}

func BenchmarkCurrentCPU(b *testing.B) {
	for range b.N {
		if _, _, err := CurrentCPU(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetcpu(b *testing.B) {
	for range b.N {
		if _, _, err := getcpu(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRestoreGivesBackTheMask(t *testing.T) {
	cpus := allowedCPUs(t)
	want := topology.NewCPUSet(cpus...)
	var got topology.CPUSet
	var original topology.CPUSet
	var err error
	inThread(func() {
		th, e := Lock(topology.NewCPUSet(cpus[0]))
		if e != nil {
			err = e
			return
		}
		original = th.original
		if e := th.Restore(); e != nil {
			err = e
			return
		}
		got, err = topology.ThreadAffinity(0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !original.Equal(want) || !got.Equal(want) {
		t.Errorf("original %s, after Restore %s, want %s", original, got, want)
	}
}

// threadMasks reads Cpus_allowed_list of every thread of the process.
func threadMasks(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited meanwhile
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[filepath.Base(filepath.Dir(p))] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// A worker pins its thread, restores the mask and exits locked: its thread
// ends with it (or, if it was the main thread, is parked by the runtime),
// and every thread left keeps the process's mask.
func TestPinnedThreadEndsWithItsGoroutine(t *testing.T) {
	cpus := allowedCPUs(t)
	want := topology.NewCPUSet(cpus...).String()
	for range 8 { // several, so that one is likely not the main thread
		var tid int
		var err error
		inThread(func() {
			var th *Thread
			if th, err = Lock(topology.NewCPUSet(cpus[len(cpus)-1])); err != nil {
				return
			}
			tid = unix.Gettid()
			err = th.RestoreMask()
			// return while locked: the runtime terminates this thread
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			masks := threadMasks(t)
			_, alive := masks[fmt.Sprint(tid)]
			if !alive || tid == os.Getpid() { // the main thread is parked, not ended
				for id, m := range masks {
					if m != want {
						t.Errorf("thread %s has mask %s, want the original %s", id, m, want)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pinned thread %d still alive after its goroutine exited", tid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestLockErrorsNameTheCPUs(t *testing.T) {
	var err error
	inThread(func() {
		var th *Thread
		th, err = Lock(topology.NewCPUSet(1023)) // no such CPU here
		if th != nil {
			_ = th.Restore()
		}
	})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "1023") {
		t.Errorf("Lock on a CPU that does not exist: %v", err)
	}

	saved := setAffinity
	setAffinity = func(topology.CPUSet) error { return unix.EPERM }
	t.Cleanup(func() { setAffinity = saved })
	inThread(func() { _, err = Lock(topology.NewCPUSet(0)) })
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "not permitted") {
		t.Errorf("Lock with EPERM: %v", err)
	}
	setAffinity = saved
	// Beyond x/sys/unix's 1024-CPU mask: the kernel gets the long mask
	// and says EINVAL because no such CPU is online.
	inThread(func() { _, err = Lock(topology.NewCPUSet(5000)) })
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "5000") {
		t.Errorf("Lock on CPU 5000: %v", err)
	}
}

// A mask reaching past 1024 CPUs (x/sys/unix's CPUSet) goes to the kernel
// whole: with one usable CPU in it, the thread is pinned there.
func TestLockTakesMasksBeyond1024CPUs(t *testing.T) {
	cpu := allowedCPUs(t)[0]
	var err error
	var got topology.CPUSet
	inThread(func() {
		th, e := Lock(topology.NewCPUSet(cpu, 2000))
		if e != nil {
			err = e
			return
		}
		defer th.Restore()
		got, err = topology.ThreadAffinity(0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(topology.NewCPUSet(cpu)) {
		t.Errorf("pinned to {%d, 2000}, the thread may run on %s", cpu, got)
	}
}

func TestAllocIsOnItsNode(t *testing.T) {
	topo := topology.Discover()
	for _, n := range topo.Nodes {
		if !n.HasMemory || !n.Allowed {
			continue
		}
		t.Run(fmt.Sprint("node", n.ID), func(t *testing.T) {
			b, release, err := Alloc(4<<20, n.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			nodes, err := PageNodes(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != len(b)/os.Getpagesize() {
				t.Fatalf("%d page nodes for %d bytes", len(nodes), len(b))
			}
			if i := slices.IndexFunc(nodes, func(x int) bool { return x != n.ID }); i >= 0 {
				t.Errorf("page %d is on node %d, want %d", i, nodes[i], n.ID)
			}
			if got, err := NodeOf(unsafe.Pointer(&b[len(b)-1])); err != nil || got != n.ID {
				t.Errorf("NodeOf = %d, %v; want %d", got, err, n.ID)
			}
		})
	}
}

func TestMemPolicy(t *testing.T) {
	var err error
	inThread(func() {
		th, e := Lock(topology.CPUSet{})
		if e != nil {
			err = e
			return
		}
		defer th.Restore()
		if err = SetMemPolicy(Bind, topology.NewCPUSet(0)); err != nil {
			return
		}
		// A fresh page touched by this thread now comes from node 0.
		b, e := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if e != nil {
			err = e
			return
		}
		defer unix.Munmap(b)
		b[0] = 1
		if n, e := NodeOf(unsafe.Pointer(&b[0])); e != nil || n != 0 {
			err = fmt.Errorf("page on node %d, %v", n, e)
			return
		}
		err = SetMemPolicy(Default, topology.CPUSet{})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p     Policy
		nodes topology.CPUSet
	}{
		{Default, topology.NewCPUSet(0)},
		{Preferred, topology.NewCPUSet(0, 1)},
		{Bind, topology.CPUSet{}},
		{Policy(9), topology.NewCPUSet(0)},
	} {
		if err := SetMemPolicy(tc.p, tc.nodes); err == nil {
			t.Errorf("SetMemPolicy(%v, %s) accepted", tc.p, tc.nodes)
		}
	}
	if err := SetMemPolicy(Bind, topology.NewCPUSet(1000)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("binding to a node that does not exist: %v", err)
	}
}

// Map starts on a huge page boundary, leaves its pages untouched, and
// gives back exactly the bytes asked for; release is idempotent.
func TestMapIsAlignedAndUntouched(t *testing.T) {
	huge := HugePageSize()
	if huge <= 0 || huge&(huge-1) != 0 {
		t.Fatalf("HugePageSize = %d", huge)
	}
	for _, size := range []int{1, os.Getpagesize() + 1, huge, 3*huge + 12345} {
		b, release, err := Map(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != size {
			t.Errorf("Map(%d): %d bytes", size, len(b))
		}
		if addr := uintptr(unsafe.Pointer(&b[0])); addr%uintptr(huge) != 0 {
			t.Errorf("Map(%d) at %#x: not aligned to %d", size, addr, huge)
		}
		resident := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(size), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
			t.Fatal(errno)
		}
		if i := slices.IndexFunc(resident, func(x byte) bool { return x&1 != 0 }); i >= 0 {
			t.Errorf("Map(%d): page %d resident before any touch", size, i)
		}
		b[0], b[size-1] = 1, 2
		if err := release(); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := release(); err != nil {
			t.Errorf("second release: %v", err)
		}
	}
	if _, _, err := Map(0); err == nil {
		t.Error("Map(0) accepted")
	}
}

// Aim sets another thread's mask: a locked thread aimed at one CPU runs
// there, and its own Set widens the mask again.
func TestAimBindsAnotherThread(t *testing.T) {
	cpus := allowedCPUs(t)
	if len(cpus) < 2 {
		t.Skip("needs two CPUs")
	}
	var all topology.CPUSet
	for _, c := range cpus {
		all.Add(c)
	}
	tidCh, aimed, done := make(chan int), make(chan struct{}), make(chan error)
	go func() {
		th, err := Lock(all)
		if err != nil {
			tidCh <- -1
			done <- err
			return
		}
		defer th.Restore()
		tidCh <- unix.Gettid()
		<-aimed
		cpu, _, err := CurrentCPU()
		if err == nil && cpu != cpus[1] {
			err = fmt.Errorf("aimed at CPU %d, runs on %d", cpus[1], cpu)
		}
		if err == nil {
			err = th.Set(all)
		}
		done <- err
	}()
	tid := <-tidCh
	if tid < 0 {
		t.Fatal(<-done)
	}
	var one topology.CPUSet
	one.Add(cpus[1])
	if err := Aim(tid, one); err != nil {
		t.Fatal(err)
	}
	if got, err := topology.ThreadAffinity(tid); err != nil || !got.Equal(one) {
		t.Errorf("thread %d's mask after Aim = %s, %v; want %s", tid, got, err, one)
	}
	close(aimed)
	if err := <-done; err != nil {
		t.Error(err)
	}
	if err := Aim(0, one); err == nil || !strings.Contains(err.Error(), "thread 0") {
		t.Errorf("Aim(0) = %v, want an error naming thread 0", err)
	}
}
