package steal

import (
	"slices"
	"testing"
)

// fourNodes: groups 0..3 of 2 workers each (0-1, 2-3, 4-5, 6-7).
// Distances from 0: group 1 at 20, groups 2 and 3 at 30 (a tie).
func fourNodes(t *testing.T) *Layout {
	t.Helper()
	d := [][]int{
		{10, 20, 30, 30},
		{20, 10, 30, 30},
		{30, 30, 10, 20},
		{30, 30, 20, 10},
	}
	l, err := NewLayout([][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}, func(a, b int) int { return d[a][b] })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func collect(walk func(int, *Rand, func(Victim) bool) bool, self int, r *Rand) []Victim {
	var out []Victim
	walk(self, r, func(v Victim) bool { out = append(out, v); return false })
	return out
}

func TestHierarchicalOrder(t *testing.T) {
	l := fourNodes(t)
	r := NewRand(1)
	firstRemote := map[int]int{}
	for range 200 {
		local := collect(l.Local, 0, &r)
		if !slices.Equal(local, []Victim{{0, 1}, {0, -1}}) {
			t.Fatalf("own node: %v, want worker 1 then shard 0", local)
		}
		remote := collect(l.Remote, 0, &r)
		// Nearest node (1) first: its workers, then its shard.
		if len(remote) != 9 || remote[0].Domain != 1 || remote[1].Domain != 1 || remote[2] != (Victim{1, -1}) {
			t.Fatalf("remote order %v: node 1 (nearest) must come first", remote)
		}
		// Then nodes 2 and 3 in either order, each complete before the next.
		a, b := remote[3].Domain, remote[6].Domain
		if !(a == 2 && b == 3 || a == 3 && b == 2) || remote[5] != (Victim{a, -1}) || remote[8] != (Victim{b, -1}) {
			t.Fatalf("far nodes out of order: %v", remote)
		}
		firstRemote[a]++
		// Every victim once per pass, never the worker itself.
		seen := map[Victim]bool{}
		for _, v := range append(local, remote...) {
			if seen[v] || v.Worker == 0 {
				t.Fatalf("victim %v repeated or self in %v", v, append(local, remote...))
			}
			seen[v] = true
		}
		if len(seen) != 7+4 {
			t.Fatalf("%d victims, want 7 workers and 4 shards", len(seen))
		}
	}
	if firstRemote[2] < 40 || firstRemote[3] < 40 {
		t.Errorf("nodes at equal distance are not chosen at random: %v", firstRemote)
	}
}

func TestRandomStartInNode(t *testing.T) {
	l, err := NewLayout([][]int{{0, 1, 2, 3, 4}}, func(a, b int) int { return 10 })
	if err != nil {
		t.Fatal(err)
	}
	r := NewRand(7)
	first := map[int]int{}
	for range 400 {
		v := collect(l.Local, 2, &r)
		if len(v) != 5 || !v[4].IsShard() {
			t.Fatalf("order %v", v)
		}
		first[v[0].Worker]++
	}
	for _, w := range []int{0, 1, 3, 4} {
		if first[w] < 50 {
			t.Errorf("worker %d came first %d times in 400: start is not random (%v)", w, first[w], first)
		}
	}
}

func TestStopEarly(t *testing.T) {
	l := fourNodes(t)
	r := NewRand(3)
	n := 0
	stopped := l.Remote(0, &r, func(Victim) bool { n++; return n == 2 })
	if !stopped || n != 2 {
		t.Errorf("visit stopped=%v after %d victims", stopped, n)
	}
}

func TestFlatOrder(t *testing.T) {
	l := fourNodes(t)
	r := NewRand(5)
	for range 100 {
		v := collect(l.Flat, 3, &r)
		if len(v) != 7+4 {
			t.Fatalf("flat visits %d victims: %v", len(v), v)
		}
		for i, x := range v[:7] {
			if x.IsShard() || x.Worker == 3 || x.Domain != l.nodeOf[x.Worker] {
				t.Fatalf("victim %d = %v", i, x)
			}
		}
		if v[7] != (Victim{1, -1}) {
			t.Fatalf("own shard not first of the shards: %v", v[7:])
		}
	}
}

func TestNewLayoutRejectsBadGroups(t *testing.T) {
	for _, nodes := range [][][]int{{{0, 0}}, {{0}, {2}}, {{-1}}} {
		if _, err := NewLayout(nodes, func(a, b int) int { return 10 }); err == nil {
			t.Errorf("NewLayout(%v) accepted", nodes)
		}
	}
}

func TestRand(t *testing.T) {
	a, b := NewRand(1), NewRand(2)
	a1, b1 := a.Uint32(), b.Uint32()
	a2, b2 := a.Uint32(), b.Uint32()
	if a1 == b1 && a2 == b2 {
		t.Error("seeds 1 and 2 give the same sequence")
	}
	var zero Rand
	counts := make([]int, 7)
	for range 70000 {
		v := zero.Intn(7)
		if v < 0 || v >= 7 {
			t.Fatalf("Intn(7) = %d", v)
		}
		counts[v]++
	}
	for i, c := range counts {
		if c < 9000 || c > 11000 {
			t.Errorf("value %d drawn %d times of 70000", i, c)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Hierarchical, Flat} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := ParseMode("random"); err == nil {
		t.Error("ParseMode accepted random")
	}
}

// Nearest lists a domain, then the others by distance, equals in index
// order: the tiers Remote visits, flattened.
func TestNearest(t *testing.T) {
	dist := [][]int{
		{10, 30, 20, 20},
		{30, 10, 20, 40},
		{20, 20, 10, 30},
		{20, 40, 30, 10},
	}
	l, err := NewLayout([][]int{{0}, {1}, {2}, {3}}, func(a, b int) int { return dist[a][b] })
	if err != nil {
		t.Fatal(err)
	}
	for g, want := range [][]int{{0, 2, 3, 1}, {1, 2, 0, 3}, {2, 0, 1, 3}, {3, 0, 2, 1}} {
		if got := l.Nearest(g); !slices.Equal(got, want) {
			t.Errorf("Nearest(%d) = %v, want %v", g, got, want)
		}
	}
}
