package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// The whole suite runs at a tiny size: every workload on every contender
// either gives a positive figure or says why it cannot run.
func TestSuiteRunsEverything(t *testing.T) {
	wls := Workloads()
	cs := Contenders("")
	scale := 0.02
	if testing.Short() {
		scale = 0.005
	}
	// A small injected cache keeps the memory workloads' arrays small.
	results, err := Run(Config{Workloads: wls, Contenders: cs, Reps: 2, Scale: scale, LLCBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range results {
		seen[r.Workload+"/"+r.Contender]++
		if r.Workload == "triad" && r.NA == "" {
			switch m := r.Memory; {
			case m == nil:
				t.Errorf("triad on %s: no memory facts", r.Contender)
			case m.LLCBytes != 1<<20 || m.Bytes <= 0 || m.Allocation == "":
				t.Errorf("triad on %s: %+v, want sized against the injected 1 MiB", r.Contender, *m)
			case runtime.GOOS == "linux" && m.LocalPct == nil:
				t.Errorf("triad on %s: locality not measured", r.Contender)
			case m.LocalPct != nil && m.MemoryNodes == 1 && *m.LocalPct != 100:
				t.Errorf("triad on %s: %.1f%% local on one memory node", r.Contender, *m.LocalPct)
			}
		}
		switch {
		case r.NA != "":
			if r.Contender == "numapool" {
				t.Errorf("numapool cannot run %s: %s", r.Workload, r.NA)
			}
		case r.Value <= 0:
			t.Errorf("%s on %s gave %v %s", r.Workload, r.Contender, r.Value, r.Unit)
		}
		if strings.HasPrefix(r.Contender, "numapool") && r.NA == "" && r.Stats == nil {
			t.Errorf("%s on %s: no numapool counters", r.Workload, r.Contender)
		}
	}
	for _, w := range wls {
		for _, c := range cs {
			if seen[w.Name+"/"+c.Name] == 0 {
				t.Errorf("no result for %s on %s", w.Name, c.Name)
			}
		}
	}
	sums := Summarize(results, wls)
	var tables bytes.Buffer
	WriteTables(&tables, sums, wls)
	for _, w := range wls {
		if !strings.Contains(tables.String(), w.Name+":") {
			t.Errorf("no table for %s", w.Name)
		}
	}
	for _, want := range []string{"sized against 1.0 MiB of last-level cache", "triad locality:"} {
		if !strings.Contains(tables.String(), want) {
			t.Errorf("tables do not say %q", want)
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, results); err != nil {
		t.Fatal(err)
	}
	var back []Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != len(results) {
		t.Fatalf("JSON round trip: %d results, %v", len(back), err)
	}
	var cv bytes.Buffer
	if err := WriteCSV(&cv, results); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cv).ReadAll()
	if err != nil || len(rows) != len(results)+1 {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
}

func TestSummarizeRatios(t *testing.T) {
	wls := []Workload{{Name: "w", Unit: "ms"}, {Name: "h", Unit: "GB/s", Higher: true}}
	results := []Result{
		{Workload: "w", Contender: "numapool", Value: 2}, {Workload: "w", Contender: "numapool", Value: 4},
		{Workload: "w", Contender: "numapool-flat", Value: 1},
		{Workload: "w", Contender: "goroutines", Value: 6},
		{Workload: "w", Contender: "sequential", Value: 12},
		{Workload: "w", Contender: "ants", NA: "cannot"},
		{Workload: "h", Contender: "numapool", Value: 10}, {Workload: "h", Contender: "pond", Value: 20},
	}
	got := map[string]Summary{}
	for _, s := range Summarize(results, wls) {
		got[s.Workload+"/"+s.Contender] = s
	}
	np := got["w/numapool"]
	if np.Median != 3 || np.Min != 2 || np.Max != 4 || np.VsBest != 2 || np.VsSequential != 4 {
		t.Errorf("numapool: %+v (want median 3, vs goroutines 2x, vs sequential 4x; numapool-flat is the same family)", np)
	}
	if g := got["w/goroutines"]; g.VsBest != 1.0/6 {
		t.Errorf("goroutines vs best other = %v, want 1/6 (numapool-flat at 1 ms)", g.VsBest)
	}
	if got["w/ants"].NA != "cannot" {
		t.Error("n/a lost")
	}
	if h := got["h/numapool"]; h.VsBest != 0.5 {
		t.Errorf("higher-is-better ratio %v, want 0.5", h.VsBest)
	}
}

func TestSelect(t *testing.T) {
	if _, err := Select(Contenders(""), "numapool,bogus"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Select: %v", err)
	}
	if _, err := SelectWorkloads("fib-12,nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("SelectWorkloads: %v", err)
	}
	cs, err := Select(Contenders("2x1"), "numapool-flat")
	if err != nil || len(cs) != 1 || cs[0].Name != "numapool-flat" {
		t.Errorf("Select = %v, %v", cs, err)
	}
}

// Go benchmarks of the same workloads, for benchstat users:
// go test -run - -bench Suite ./bench
func BenchmarkSuite(b *testing.B) {
	for _, w := range Workloads() {
		for _, c := range Contenders("") {
			b.Run(w.Name+"/"+c.Name, func(b *testing.B) {
				r, err := start(c)
				if err != nil {
					b.Fatal(err)
				}
				defer r.stop()
				var last float64
				for b.Loop() {
					v, _, err := w.run(r, 0.1)
					if IsNA(err) {
						b.Skip(err)
					}
					if err != nil {
						b.Fatal(err)
					}
					last = v
				}
				b.ReportMetric(last, strings.ReplaceAll(w.Unit, " ", "_"))
			})
		}
	}
}

func TestWriteSVG(t *testing.T) {
	wls := []Workload{{Name: "w", Unit: "ms", About: "a <test>"}}
	results := []Result{
		{Workload: "w", Contender: "numapool", Value: 2, Unit: "ms"},
		{Workload: "w", Contender: "goroutines", Value: 4, Unit: "ms"},
		{Workload: "w", Contender: "ants", NA: "cannot", Unit: "ms"},
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, Summarize(results, wls), wls); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	dec := xml.NewDecoder(strings.NewReader(svg))
	rects := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	if rects != 3 { // the background and two bars; ants has none
		t.Errorf("%d rects, want 3", rects)
	}
	if !strings.Contains(svg, "a &lt;test&gt;") || !strings.Contains(svg, "n/a") {
		t.Errorf("labels not escaped or n/a missing:\n%s", svg)
	}
}

// A workload's repetitions go round its contenders, each round starting
// one further on, each repetition on a contender started and warmed up
// (at the same size) for it; results
// come back grouped by contender in repetition order, and a contender
// that cannot run the workload is asked once.
func TestRepetitionsGoRoundTheContenders(t *testing.T) {
	cs, err := Select(Contenders(""), "numapool,goroutines,ants,sequential")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	calls := map[*runner]int{}
	wl := Workload{Name: "probe", Unit: "x", run: func(r *runner, s float64) (float64, map[string]float64, error) {
		if r.c.Name == "ants" {
			return 0, nil, na("not this one")
		}
		if s != 1 {
			t.Errorf("%s: run at scale %v, want the repetition's 1 (the warm-up too)", r.c.Name, s)
		}
		calls[r]++
		switch calls[r] {
		case 1: // the warm-up
		case 2:
			order = append(order, r.c.Name)
		default:
			t.Errorf("%s: two repetitions on one start", r.c.Name)
		}
		return 1, nil, nil
	}}
	var progress []int
	var rounds []string
	cfg := Config{Workloads: []Workload{wl}, Contenders: cs, Reps: 3, Scale: 1,
		Progress: func(done, total int, _ string) { progress = append(progress, done, total) },
		BeforeRound: func(w string) {
			if len(order)%3 != 0 {
				t.Errorf("a round began after %d repetitions", len(order))
			}
			rounds = append(rounds, w)
		}}
	results, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"numapool", "goroutines", "sequential",
		"goroutines", "sequential", "numapool",
		"sequential", "numapool", "goroutines",
	}
	if !slices.Equal(order, want) {
		t.Errorf("order of repetitions %v, want %v", order, want)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s/%d/%s", r.Contender, r.Rep, r.NA))
	}
	wantRes := []string{"numapool/0/", "numapool/1/", "numapool/2/", "goroutines/0/", "goroutines/1/", "goroutines/2/",
		"ants/0/not this one", "sequential/0/", "sequential/1/", "sequential/2/"}
	if !slices.Equal(got, wantRes) {
		t.Errorf("results %v, want %v", got, wantRes)
	}
	if !slices.Equal(rounds, []string{"probe", "probe", "probe"}) {
		t.Errorf("BeforeRound calls %v, want one per round", rounds)
	}
	var wantProgress []int
	for done := range 13 { // one step per contender and round, n/a ones too, then the end
		wantProgress = append(wantProgress, done, 12)
	}
	if !slices.Equal(progress, wantProgress) {
		t.Errorf("progress (done, total) %v, want %v", progress, wantProgress)
	}
}

// Alone (perf stat's --mode) runs a contender's repetitions on one start
// without a warm-up.
func TestAloneRunsOneStartWithoutWarmup(t *testing.T) {
	cs, err := Select(Contenders(""), "goroutines")
	if err != nil {
		t.Fatal(err)
	}
	calls := map[*runner]int{}
	wl := Workload{Name: "probe", Unit: "x", run: func(r *runner, s float64) (float64, map[string]float64, error) {
		calls[r]++
		return float64(calls[r]), nil, nil
	}}
	results, err := Run(Config{Workloads: []Workload{wl}, Contenders: cs, Reps: 3, Scale: 1, Alone: true,
		BeforeRound: func(string) { t.Error("BeforeRound called when Alone") }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d starts, want 1", len(calls))
	}
	var got []float64
	for i, r := range results {
		if r.Rep != i {
			t.Errorf("result %d is repetition %d", i, r.Rep)
		}
		got = append(got, r.Value)
	}
	if !slices.Equal(got, []float64{1, 2, 3}) {
		t.Errorf("calls per repetition %v, want [1 2 3] (no warm-up)", got)
	}
}

// A contender that says n/a after a repetition that ran is n/a for the
// workload: no figures mixed with the n/a, and it is not asked again.
func TestNAAfterARepetitionIsNAForTheWorkload(t *testing.T) {
	cs, err := Select(Contenders(""), "goroutines,sequential")
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	wl := Workload{Name: "probe", Unit: "x", run: func(r *runner, s float64) (float64, map[string]float64, error) {
		asked[r.c.Name]++
		if r.c.Name == "goroutines" && asked[r.c.Name] == 4 { // the second repetition
			return 0, nil, na("not now")
		}
		return 1, nil, nil
	}}
	results, err := Run(Config{Workloads: []Workload{wl}, Contenders: cs, Reps: 3, Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s/%s", r.Contender, r.NA))
	}
	if want := []string{"goroutines/not now", "sequential/", "sequential/", "sequential/"}; !slices.Equal(got, want) {
		t.Errorf("results %v, want %v", got, want)
	}
	if asked["goroutines"] != 4 {
		t.Errorf("goroutines asked %d times, want 4 (two starts of warm-up and repetition)", asked["goroutines"])
	}
}

// The triad's arrays take four times the last-level caches at the quick
// size and eight at the full size, within the memory budget: 300 MiB of
// L3 give at least 1200 MiB (1.26e9 bytes) in the quick suite.
func TestTriadSizing(t *testing.T) {
	const mib = 1 << 20
	big := memorySizing{llc: 300 * mib, budget: 64 << 30, nodes: 2}
	for _, c := range []struct {
		scale     float64
		atLeast   int64
		butBelow  int64
		sizing    memorySizing
		situation string
	}{
		{0.5, 1200 * mib, 1300 * mib, big, "quick, 300 MiB of L3"},
		{1, 2400 * mib, 2500 * mib, big, "full, 300 MiB of L3"},
		{0.5, 96 * mib, 128*mib + 1, memorySizing{llc: 300 * mib, budget: 128 * mib}, "quick, budget of 128 MiB"},
		{0.0001, 3 * minArrayBytes, 3*minArrayBytes + 1, big, "a tiny test size"},
	} {
		n := c.sizing.arrayElems(3, c.scale)
		got := int64(n) * 24
		if got < c.atLeast || got >= c.butBelow {
			t.Errorf("%s: arrays of %d MiB together, want [%d, %d) MiB", c.situation, got/mib, c.atLeast/mib, c.butBelow/mib)
		}
	}
	if got := int64(big.arrayElems(3, 0.5)) * 24; got < 1_200_000_000 {
		t.Errorf("quick triad over %d bytes with 300 MiB of L3, want at least 1.2e9", got)
	}
}

// The caches summed are every last-level cache that serves an allowed
// CPU, once each; the budget is a quarter of the allowed nodes' memory,
// at most budgetCap; injected sizes win.
func TestSizingFromTopology(t *testing.T) {
	const gib = 1 << 30
	topo := &topology.Topology{
		Caches: []topology.Cache{{Level: 3, SizeBytes: 32 << 20}, {Level: 3, SizeBytes: 32 << 20}, {Level: 3, SizeBytes: 96 << 20}},
		CPUs: []topology.CPU{
			{ID: 0, LastLevelCache: 0, Allowed: true}, {ID: 1, LastLevelCache: 0, Allowed: true},
			{ID: 2, LastLevelCache: 1, Allowed: true}, {ID: 3, LastLevelCache: 2, Allowed: false},
		},
		Nodes: []topology.Node{
			{ID: 0, MemoryBytes: 8 * gib, HasMemory: true, Allowed: true},
			{ID: 1, MemoryBytes: 8 * gib, HasMemory: true, Allowed: true},
			{ID: 2, MemoryBytes: 64 * gib, HasMemory: true, Allowed: false},
		},
		AllowedMems: topology.NewCPUSet(0, 1),
	}
	s := sizingFor(topo, 0, 0)
	if s.llc != 64<<20 || s.budget != 4*gib || s.nodes != 2 {
		t.Errorf("sizing %+v, want 64 MiB of LLC (CPU 3's is not allowed), a 4 GiB budget, 2 nodes", s)
	}
	topo.Nodes[0].MemoryBytes = 1 << 40
	if s := sizingFor(topo, 0, 0); s.budget != budgetCap {
		t.Errorf("budget %d with a TiB node, want the cap %d", s.budget, budgetCap)
	}
	if s := sizingFor(topo, 300<<20, 1*gib); s.llc != 300<<20 || s.budget != gib {
		t.Errorf("injected sizes ignored: %+v", s)
	}
	topo.Caches, topo.Machine.L3 = nil, 16<<20
	topo.Packages = make([]topology.Package, 2)
	for i := range topo.CPUs {
		topo.CPUs[i].LastLevelCache = -1
	}
	if s := sizingFor(topo, 0, 0); s.llc != 32<<20 {
		t.Errorf("without sysfs caches: %d bytes, want cpuid's 16 MiB L3 for each of 2 packages", s.llc)
	}
}

// localShare counts a chunk's bytes on its node in proportion to its
// sampled pages there, and a chunk that moved, or whose CurrentCPU failed,
// as remote.
func TestLocalShare(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []chunkSample
		want    float64
	}{
		{"none", nil, 0},
		{"all local", []chunkSample{{100, 0, 0, []int{0, 0, 0}}, {300, 1, 1, []int{1, 1, 1}}}, 100},
		{"one chunk remote", []chunkSample{{100, 0, 0, []int{1, 1, 1}}, {300, 1, 1, []int{1, 1, 1}}}, 75},
		{"a third of the pages elsewhere", []chunkSample{{300, 0, 0, []int{0, 1, 0, 0, 1, 0}}}, 200.0 / 3},
		{"moved during the chunk", []chunkSample{{100, 0, 1, []int{0, 0, 0}}, {100, 1, 1, []int{1, 1, 1}}}, 50},
		{"CurrentCPU failed", []chunkSample{{100, -1, -1, []int{-1, -1, -1}}, {100, 0, 0, []int{0, 0, 0}}}, 50},
		{"page not present", []chunkSample{{400, 0, 0, []int{0, -1, 0, 0}}}, 75},
	} {
		if got := localShare(c.samples); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %.4f%%, want %.4f%%", c.name, got, c.want)
		}
	}
}

// TriadLocality measures the suite's way for any contender; on this
// machine's nodes every byte it processes is counted once.
func TestTriadLocality(t *testing.T) {
	cs, err := Select(Contenders(""), "numapool,goroutines")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		loc, err := TriadLocality(c, 12<<20)
		if errors.Is(err, pin.ErrUnsupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if loc.Bytes < 12<<20 || loc.Chunks == 0 || loc.LocalPct < 0 || loc.LocalPct > 100 {
			t.Errorf("%s: %+v", c.Name, loc)
		}
		if topology.Discover().AllowedMems.Len() == 1 && loc.LocalPct != 100 {
			t.Errorf("%s: %.1f%% local on one memory node", c.Name, loc.LocalPct)
		}
	}
}
