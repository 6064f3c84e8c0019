package goruntime

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// gVerifiedGo is the newest Go release whose runtime curG and the g
// layout below were checked against (g_asm.go lists what to check).
const gVerifiedGo = "1.26"

// The offsets of fields of the runtime's g on 64-bit platforms in Go
// 1.26 (runtime/runtime2.go): stack.lo and stack.hi open the struct, and
// goid follows stack, stackguard0/1, _panic, _defer, m, sched (a gobuf
// of six words), syscallsp/pc/bp, stktopsp, param, atomicstatus and
// stackLock.
const (
	gStackLoOffset = 0
	gStackHiOffset = 8
	gGoidOffset    = 152
)

// goMinor returns the minor number of a Go release as runtime.Version
// spells it ("go1.26.8", "go1.27rc1", "devel go1.27-abcdef Tue ..."),
// and false if v names no Go 1 release.
func goMinor(v string) (int, bool) {
	v = strings.TrimPrefix(v, "devel ")
	v, ok := strings.CutPrefix(v, "go1.")
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(v) && '0' <= v[end] && v[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(v[:end])
	return n, err == nil
}

func TestGoMinor(t *testing.T) {
	for _, c := range []struct {
		v    string
		n    int
		isGo bool
	}{
		{"go1.26.8", 26, true},
		{"go1.26", 26, true},
		{"go1.27rc1", 27, true},
		{"devel go1.27-0123abcd Tue Feb 2 10:00:00 2027 +0000", 27, true},
		{"go1.100.1", 100, true},
		{"devel +0123abcd", 0, false},
		{"gccgo", 0, false},
		{"go1.", 0, false},
	} {
		n, isGo := goMinor(c.v)
		if isGo != c.isGo || isGo && n != c.n {
			t.Errorf("goMinor(%q) = %d, %v; want %d, %v", c.v, n, isGo, c.n, c.isGo)
		}
	}
}

// A Go release newer than gVerifiedGo fails here until someone checks
// curG and the g layout against its runtime and raises gVerifiedGo.
func TestGIDVerifiedForThisGo(t *testing.T) {
	if !Cheap {
		t.Skip("G parses runtime.Stack on this platform: no assembly to check")
	}
	verified, _ := goMinor("go" + gVerifiedGo)
	running, ok := goMinor(runtime.Version())
	if !ok {
		t.Fatalf("G reads the runtime's g (g_amd64.s, g_arm64.s), checked against Go %s; %s names no Go release to compare: check g_asm.go's list against this runtime", gVerifiedGo, runtime.Version())
	}
	if running > verified {
		t.Fatalf("G reads the runtime's g (g_amd64.s, g_arm64.s), checked against Go %s, and this is %s: check g_asm.go's list and g_test.go's offsets against runtime/runtime2.go of this release, then raise gVerifiedGo", gVerifiedGo, runtime.Version())
	}
}

// stackGoid returns the calling goroutine's id as runtime.Stack prints
// it, and the text it read when that does not begin "goroutine N ".
func stackGoid() (uint64, string) {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	rest, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(rest, ' '); ok && i > 0 {
		if n, err := strconv.ParseUint(string(rest[:i]), 10, 64); err == nil {
			return n, ""
		}
	}
	return 0, string(b)
}

// gField reads the word at offset off of the g at address g.
func gField(g uintptr, off uintptr) uint64 {
	// The runtime neither frees nor moves a g (g_asm.go), so its address
	// may be turned back into a pointer.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&g))
	return *(*uint64)(unsafe.Add(p, off))
}

// checkG checks, on the calling goroutine, that G is its runtime g: the
// g's goid is the id runtime.Stack prints, and its stack bounds hold a
// local variable. It reports with t.Errorf only, so any goroutine may
// call it.
func checkG(t *testing.T, where string) uintptr {
	t.Helper()
	g := G()
	if g == 0 {
		t.Errorf("%s: G() = 0", where)
		return 0
	}
	want, text := stackGoid()
	if text != "" {
		t.Errorf("%s: runtime.Stack begins %q, not \"goroutine N \"", where, text)
	} else if got := gField(g, gGoidOffset); got != want {
		t.Errorf("%s: the g at G() has goid %d, runtime.Stack says goroutine %d: G is not the g's address, or goid moved (%s)", where, got, want, runtime.Version())
	}
	var local byte
	addr := uint64(uintptr(unsafe.Pointer(&local)))
	lo, hi := gField(g, gStackLoOffset), gField(g, gStackHiOffset)
	if addr < lo || addr >= hi {
		t.Errorf("%s: a local at %#x lies outside the stack [%#x, %#x) of the g at G(): G is not the g's address, or the stack bounds moved (%s)", where, addr, lo, hi, runtime.Version())
	}
	return g
}

// growStack recurses deep enough for the runtime to copy the goroutine's
// stack to a larger one, then calls fn.
func growStack(depth int, fn func()) int {
	var pad [64]byte
	if depth == 0 {
		fn()
		return int(pad[0])
	}
	return growStack(depth-1, fn) + int(pad[depth%len(pad)])
}

// G is the calling goroutine's runtime g, checked against two of its
// fields, on the test's goroutine and on fresh ones, and it stays the same
// while the goroutine yields, blocks and has its stack moved.
func TestGIDIsTheRuntimeG(t *testing.T) {
	if !Cheap {
		t.Skip("G is the goroutine's id on this platform, not its g")
	}
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the g offsets are those of 64-bit platforms")
	}
	g := checkG(t, "test goroutine")
	runtime.Gosched()
	if got := G(); got != g {
		t.Errorf("G() changed from %#x to %#x across runtime.Gosched", g, got)
	}
	growStack(10000, func() {
		if got := checkG(t, "after stack growth"); got != g {
			t.Errorf("G() changed from %#x to %#x as the stack grew", g, got)
		}
	})
	ch := make(chan uintptr)
	go func() { ch <- checkG(t, "fresh goroutine") }()
	if other := <-ch; other == g {
		t.Errorf("G() is %#x on two live goroutines", g)
	}
}

// Live goroutines have distinct gids, each the same each time it asks.
func TestGIDDistinctAndStable(t *testing.T) {
	const n = 64
	var ready, hold sync.WaitGroup
	ready.Add(n)
	hold.Add(1)
	gids := make([]uintptr, n)
	unstable := make([]bool, n)
	var done sync.WaitGroup
	for i := range n {
		done.Go(func() {
			gids[i] = G()
			ready.Done()
			hold.Wait() // all n stay alive until every one has its gid
			runtime.Gosched()
			unstable[i] = G() != gids[i]
		})
	}
	ready.Wait()
	hold.Done()
	done.Wait()
	seen := make(map[uintptr]int, n)
	for i, g := range gids {
		if g == 0 {
			t.Errorf("goroutine %d: G() = 0", i)
		}
		if j, dup := seen[g]; dup {
			t.Errorf("goroutines %d and %d, both alive, have gid %#x", j, i, g)
		}
		seen[g] = i
		if unstable[i] {
			t.Errorf("goroutine %d: G() changed while it lived", i)
		}
	}
}
