package fold

import (
	"strconv"
	"sync"
	"testing"
)

// Results put in any order fold in item order (string concatenation is
// not commutative), the window never hands out an item a ring's length
// past the first one not folded, and every parked claimer is restarted.
func TestWindowFoldsInOrder(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8, 100} {
		var w Window[string]
		const lo, hi = 5, 205
		w.Init(lo, hi, size)
		var (
			mu      sync.Mutex
			parked  int
			started int
			wg      sync.WaitGroup
		)
		var worker func()
		worker = func() {
			defer wg.Done()
			for {
				c, ok, full := w.Take(true)
				if full {
					mu.Lock()
					parked++
					mu.Unlock()
					return
				}
				if !ok {
					return
				}
				if r := w.Put(c, strconv.Itoa(c)+",", func(a, b string) string { return a + b }); r > 0 {
					mu.Lock()
					started += r
					mu.Unlock()
					for range r {
						wg.Add(1)
						go worker()
					}
				}
			}
		}
		for range 4 {
			wg.Add(1)
			go worker()
		}
		wg.Wait()
		// Claimers parked after the last fold that moved on are left
		// only if every item was handed out.
		for {
			if c, ok, _ := w.Take(false); ok {
				t.Fatalf("size %d: item %d left after every worker ended", size, c)
			}
			break
		}
		want := ""
		for c := lo; c < hi; c++ {
			want += strconv.Itoa(c) + ","
		}
		got, ok := w.Result()
		if !ok || got != want {
			t.Errorf("size %d: fold %q..., want %q...", size, got[:min(len(got), 20)], want[:20])
		}
		if started > parked {
			t.Errorf("size %d: %d restarts for %d parked claimers", size, started, parked)
		}
	}
}

// A claim past the window is refused until the fold moves on.
func TestWindowRefusesPastItsSize(t *testing.T) {
	var w Window[int]
	w.Init(0, 10, 2)
	a, _, _ := w.Take(false)
	b, _, _ := w.Take(false)
	if _, ok, full := w.Take(true); ok || !full {
		t.Fatalf("a third claim in a window of 2: ok %v, full %v", ok, full)
	}
	if r := w.Put(b, 1, func(x, y int) int { return x + y }); r != 0 {
		t.Errorf("a put that folds nothing restarts %d", r)
	}
	if r := w.Put(a, 1, func(x, y int) int { return x + y }); r != 1 {
		t.Errorf("the put that moved the fold on restarts %d, want the 1 parked", r)
	}
	if _, ok, _ := w.Take(false); !ok {
		t.Error("no claim after the fold moved on")
	}
	var e Window[int]
	e.Init(3, 3, 4)
	if _, ok := e.Result(); ok {
		t.Error("an empty range has a result")
	}
}
