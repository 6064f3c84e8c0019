package pin

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapool/numapool/topology"
)

func ptr[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// nodeMask turns a set of node numbers into the kernel's nodemask: an
// array of unsigned longs and maxnode. The kernel reads maxnode-1 bits
// (mm/mempolicy.c get_nodes decrements it), so maxnode is the bit count
// plus one, as libnuma passes it. x/sys/unix's SetMemPolicy takes a
// CPUSet as the mask, which is why numapool calls the system calls itself.
func nodeMask(nodes topology.CPUSet) (mask []uint64, maxnode uintptr) {
	for n := range nodes.All() {
		for n/64 >= len(mask) {
			mask = append(mask, 0)
		}
		mask[n/64] |= 1 << (n % 64)
	}
	if len(mask) == 0 {
		return nil, 0
	}
	return mask, uintptr(len(mask)*64 + 1)
}

func maskPtr(mask []uint64) uintptr {
	if len(mask) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&mask[0]))
}

// SetMemPolicy sets the calling thread's memory policy (set_mempolicy(2))
// for the pages it touches first from now on. Call it on a locked thread:
// the policy belongs to the thread, not the goroutine.
func SetMemPolicy(p Policy, nodes topology.CPUSet) error {
	if err := p.check(nodes); err != nil {
		return err
	}
	mask, maxnode := nodeMask(nodes)
	_, _, errno := unix.Syscall(unix.SYS_SET_MEMPOLICY, uintptr(p.mode()), maskPtr(mask), maxnode)
	if errno != 0 {
		return fmt.Errorf("pin: set_mempolicy(%v, nodes %s): %w", p, nodes, errno)
	}
	return nil
}

// Mbind sets the memory policy of the pages of b (mbind(2)); pages
// already placed elsewhere are moved (MPOL_MF_MOVE) where the kernel can.
// b must start on a page boundary, as memory from Alloc does.
func Mbind(b []byte, p Policy, nodes topology.CPUSet) error {
	if len(b) == 0 {
		return nil
	}
	if err := p.check(nodes); err != nil {
		return err
	}
	mask, maxnode := nodeMask(nodes)
	_, _, errno := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		uintptr(p.mode()), maskPtr(mask), maxnode, unix.MPOL_MF_MOVE)
	if errno != 0 {
		return fmt.Errorf("pin: mbind(%d bytes, %v, nodes %s): %w", len(b), p, nodes, errno)
	}
	return nil
}

// Map maps size bytes of anonymous memory and touches none of it: each
// page is allocated on the node of the thread that first writes it (or by
// the thread's memory policy). Go's own allocator may zero reused memory
// on the allocating thread, which defeats first touch; memory from Map
// does not have that problem. release unmaps it.
//
// The mapping starts on a transparent huge page boundary (HugePageSize).
// With THP enabled the kernel places a whole huge page on the node of its
// first toucher, so first-touch placement has huge-page granularity: a
// block boundary inside a huge page leaves that huge page on one side.
// Aligning the start keeps blocks that are multiples of the huge page size
// exact, and limits the rest to one huge page per boundary.
func Map(size int) (b []byte, release func() error, err error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("pin: Map of %d bytes", size)
	}
	align := uintptr(HugePageSize())
	length := uintptr(size)
	// Map align bytes more than asked, then unmap the unaligned head and
	// the tail beyond the aligned region.
	raw, err := unix.MmapPtr(-1, 0, nil, length+align, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("pin: mmap of %d bytes: %w", size, err)
	}
	start := uintptr(raw)
	aligned := (start + align - 1) &^ (align - 1)
	if head := aligned - start; head > 0 {
		_ = unix.MunmapPtr(raw, head)
	}
	if tail := start + length + align - (aligned + length); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(raw, aligned-start+length), tail)
	}
	p := unsafe.Add(raw, aligned-start)
	var released atomic.Bool
	release = func() error {
		if !released.CompareAndSwap(false, true) {
			return nil // a second munmap could hit a later mapping at the same address
		}
		return unix.MunmapPtr(p, length)
	}
	return unsafe.Slice((*byte)(p), size), release, nil
}

// HugePageSize is the size of a transparent huge page
// (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size), or 2 MiB where the
// kernel does not say.
func HugePageSize() int {
	hugePageOnce.Do(func() {
		hugePage = 2 << 20
		b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
		if err != nil {
			return
		}
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 && v&(v-1) == 0 {
			hugePage = v
		}
	})
	return hugePage
}

var (
	hugePageOnce sync.Once
	hugePage     int
)

// Alloc maps size bytes of anonymous memory bound to node (MPOL_BIND) and
// touches every page so that the memory is on the node when Alloc
// returns. release unmaps it; the slice must not be used afterwards.
func Alloc(size, node int) (b []byte, release func() error, err error) {
	if size <= 0 {
		return nil, nil, fmt.Errorf("pin: Alloc of %d bytes", size)
	}
	if node < 0 || node >= topology.MaxCPU {
		return nil, nil, fmt.Errorf("pin: Alloc on node %d: no such node", node)
	}
	b, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("pin: mmap of %d bytes: %w", size, err)
	}
	release = func() error { return unix.Munmap(b) }
	if err := Mbind(b, Bind, topology.NewCPUSet(node)); err != nil {
		_ = release()
		return nil, nil, err
	}
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 0 // first touch: the fault allocates the page under the policy
	}
	return b, release, nil
}

// NodeOf returns the NUMA node of the page holding addr
// (get_mempolicy(2) with MPOL_F_NODE|MPOL_F_ADDR). A page not yet present
// is faulted in first.
func NodeOf(addr unsafe.Pointer) (int, error) {
	var node int32
	_, _, errno := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
		uintptr(addr), unix.MPOL_F_NODE|unix.MPOL_F_ADDR, 0)
	if errno != 0 {
		return -1, fmt.Errorf("pin: get_mempolicy(%p): %w", addr, errno)
	}
	return int(node), nil
}

// PageNodes returns the node of every page of b (move_pages(2) with no
// target nodes, which only queries). A page that is not present reports -1.
func PageNodes(b []byte) ([]int, error) {
	if len(b) == 0 {
		return nil, nil
	}
	page := os.Getpagesize()
	start := uintptr(unsafe.Pointer(&b[0])) &^ uintptr(page-1)
	end := uintptr(unsafe.Pointer(&b[len(b)-1]))
	n := int((end-start)/uintptr(page)) + 1
	pages := make([]uintptr, n)
	for i := range pages {
		pages[i] = start + uintptr(i*page)
	}
	status := make([]int32, n)
	out := make([]int, n)
	// A page just touched can report -EBUSY while the kernel settles it:
	// ask again a few times for those.
	for try := 0; try < 5; try++ {
		_, _, errno := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n), uintptr(unsafe.Pointer(&pages[0])), 0,
			uintptr(unsafe.Pointer(&status[0])), 0)
		if errno != 0 {
			return nil, fmt.Errorf("pin: move_pages query of %d pages: %w", n, errno)
		}
		busy := false
		for i, s := range status {
			out[i] = max(int(s), -1) // -ENOENT and friends: not present
			busy = busy || s == -int32(unix.EBUSY)
		}
		if !busy {
			break
		}
	}
	return out, nil
}
