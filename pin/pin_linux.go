package pin

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapool/numapool/topology"
)

// The affinity system calls, behind variables so that tests can make them
// fail. They act on the calling thread, with masks as large as the CPU
// numbers in them (x/sys/unix's CPUSet stops at 1024 CPUs).
var (
	getAffinity = func() (topology.CPUSet, error) { return topology.ThreadAffinity(0) }
	setAffinity = func(cpus topology.CPUSet) error { return setThreadAffinity(0, cpus) }
)

// setThreadAffinity sets thread tid's mask (0: the calling thread).
func setThreadAffinity(tid int, cpus topology.CPUSet) error {
	mask := cpus.Mask()
	if len(mask) == 0 {
		return unix.EINVAL
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETAFFINITY, uintptr(tid), uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// Aim sets the mask of thread tid, another thread of this process, to
// cpus: a thread that is about to be woken then runs there at once,
// instead of where the kernel would queue it (often behind its waker).
// The thread widens its own mask again with Thread.Set once it runs.
func Aim(tid int, cpus topology.CPUSet) error {
	if tid <= 0 {
		return fmt.Errorf("pin: aim thread %d: %w", tid, unix.ESRCH)
	}
	if err := setThreadAffinity(tid, cpus); err != nil {
		return fmt.Errorf("pin: sched_setaffinity of thread %d to CPUs %s: %w", tid, cpus, err)
	}
	return nil
}

// Thread is the calling goroutine's OS thread, locked and pinned. Its
// methods must be called from the goroutine that called Lock.
type Thread struct {
	original topology.CPUSet
	unlocked bool
}

// Lock locks the calling goroutine to its OS thread and, unless cpus is
// empty, sets the thread's affinity to cpus (OS CPU numbers). The
// thread's original mask is kept for Restore. On error the goroutine is
// unlocked again and the thread's mask is unchanged; the error names the
// CPUs and the errno (EINVAL: none of them is usable; EPERM: not
// permitted).
func Lock(cpus topology.CPUSet) (*Thread, error) {
	runtime.LockOSThread()
	orig, err := getAffinity()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("pin: %w", err)
	}
	th := &Thread{original: orig}
	if cpus.IsEmpty() {
		return th, nil
	}
	if err := th.Set(cpus); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return th, nil
}

// Original returns the thread's mask before Lock bound it.
func (th *Thread) Original() topology.CPUSet { return th.original }

// Set changes the pinned thread's affinity to cpus.
func (th *Thread) Set(cpus topology.CPUSet) error {
	if th.unlocked {
		panic("pin: Set on a thread that was restored and unlocked")
	}
	if err := setAffinity(cpus); err != nil {
		switch {
		case errors.Is(err, unix.EINVAL):
			return fmt.Errorf("pin: sched_setaffinity to CPUs %s: %w (none of them is online and allowed)", cpus, err)
		case errors.Is(err, unix.EPERM):
			return fmt.Errorf("pin: sched_setaffinity to CPUs %s: %w (not permitted)", cpus, err)
		}
		return fmt.Errorf("pin: sched_setaffinity to CPUs %s: %w", cpus, err)
	}
	return nil
}

// RestoreMask puts the original mask back and keeps the goroutine locked:
// for a worker that ends with its thread. When its goroutine returns, the
// runtime terminates the thread, or, if it is the process's main thread,
// parks it for good; either way no thread stays narrowed, and the main
// thread's mask (what /proc/self/status and sched_getaffinity(pid) report)
// stays the process's.
func (th *Thread) RestoreMask() error {
	if err := setAffinity(th.original); err != nil {
		return fmt.Errorf("pin: restoring CPUs %s: %w", th.original, err)
	}
	return nil
}

// Restore puts the original mask back and unlocks the goroutine from the
// thread. If the mask cannot be restored the goroutine stays locked, so
// that the thread exits with it instead of returning to the runtime
// pinned; the error says so.
func (th *Thread) Restore() error {
	if th.unlocked {
		return nil
	}
	if err := th.RestoreMask(); err != nil {
		return fmt.Errorf("%w (the goroutine stays locked to its thread)", err)
	}
	th.unlocked = true
	runtime.UnlockOSThread()
	return nil
}

// CurrentCPU returns the CPU and the NUMA node the calling thread is
// running on now, as getcpu(2) does: on x86-64 from the register the
// kernel keeps them in for its vDSO (one instruction; the register is
// checked against getcpu once, and not trusted where they differ), else
// from getcpu. The answer may be stale as soon as it returns unless the
// thread is pinned to one CPU.
func CurrentCPU() (cpu, node int, err error) {
	if cpu, node, ok := fastCPU(); ok {
		return cpu, node, nil
	}
	return getcpu()
}

// getcpu is the getcpu(2) system call.
func getcpu() (cpu, node int, err error) {
	var c, n uint32
	_, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(ptr(&c)), uintptr(ptr(&n)), 0)
	if errno != 0 {
		return 0, 0, fmt.Errorf("pin: getcpu: %w", errno)
	}
	return int(c), int(n), nil
}

// onceBool is a flag computed once, at its first use.
type onceBool struct {
	once sync.Once
	v    bool
}

// get returns the flag, computing it with f the first time.
func (o *onceBool) get(f func() bool) bool {
	o.once.Do(func() { o.v = f() })
	return o.v
}

// auxOK says whether fastCPU may read the CPU from its register.
var auxOK onceBool
