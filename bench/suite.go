package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/numapool/numapool/pool"
	"github.com/numapool/numapool/topology"
)

// Config says what to run.
type Config struct {
	Workloads  []Workload
	Contenders []Contender
	Reps       int     // repetitions per contender and workload
	Scale      float64 // input size: 1 is the full suite, smaller is quicker
	Progress   func(done, total int, what string)
	// Alone runs each contender's repetitions on one start, without a
	// warm-up and without going round the others: for perf stat, which
	// counts a whole process running one contender (--mode).
	Alone bool
	// BeforeRound, if set, is called before each round of a workload's
	// repetitions, with no contender started (the CLI times how long a
	// cache line takes between two CPUs there); not when Alone.
	BeforeRound func(workload string)
	// LLCBytes and MemoryBudget, when positive, replace what the machine
	// says for sizing the memory workloads: the bytes of last-level cache
	// of the allowed CPUs (all cache domains together), and the bytes
	// their arrays may take together (default: a quarter of the allowed
	// nodes' memory, at most 16 GiB). Tests give a small cache instead
	// of allocating gigabytes.
	LLCBytes     int64
	MemoryBudget int64
}

// sizing returns the memory workloads' sizing for cfg on this machine.
func (cfg Config) sizing() memorySizing {
	return sizingFor(topology.Discover(), cfg.LLCBytes, cfg.MemoryBudget)
}

// Result is one repetition of one workload by one contender; a contender
// that cannot run a workload has NA set and no Value.
type Result struct {
	Workload  string             `json:"workload"`
	Contender string             `json:"contender"`
	Rep       int                `json:"rep"`
	Value     float64            `json:"value"`
	Unit      string             `json:"unit"`
	Extra     map[string]float64 `json:"extra,omitempty"`
	NA        string             `json:"na,omitempty"`
	Stats     *pool.Counters     `json:"stats,omitempty"`  // numapool's counters over the repetition
	Memory    *MemoryFacts       `json:"memory,omitempty"` // memory workloads only
}

// MemoryFacts is what a memory workload reports beside its figure: how
// large its arrays were and what they were sized against, how the
// contender placed them, and where the bytes were processed.
type MemoryFacts struct {
	Bytes       int64  `json:"bytes"`        // the workload's arrays together
	LLCBytes    int64  `json:"llc_bytes"`    // the last-level caches they were sized against
	BudgetBytes int64  `json:"budget_bytes"` // the memory budget that bounded them
	MemoryNodes int    `json:"memory_nodes"` // nodes the process may allocate from
	Allocation  string `json:"allocation"`   // how the contender allocated and first touched them
	// LocalPct is the share of the bytes of one untimed pass that were
	// processed on the node that holds them (localShare says how it is
	// measured); absent when it could not be measured (no CPU read or
	// move_pages).
	LocalPct *float64 `json:"local_pct,omitempty"`
}

// Run runs every workload on every contender Reps times and returns every
// repetition, grouped by workload and contender. A workload's repetitions
// go round its contenders: the first of each, then the second of each,
// each round starting one contender further on. A machine that slows down
// for a minute (a shared host does) then slows every contender alike,
// not only the one whose turn it was. Each repetition has its contender
// started, warmed up and stopped for it (start says why only one at a
// time), unless cfg.Alone.
func Run(cfg Config) ([]Result, error) {
	reps := max(cfg.Reps, 1)
	total := len(cfg.Workloads) * len(cfg.Contenders) * reps
	done := 0
	var out []Result
	for _, wl := range cfg.Workloads {
		got := make([][]Result, len(cfg.Contenders))
		for rep := range reps {
			if cfg.BeforeRound != nil && !cfg.Alone {
				cfg.BeforeRound(wl.Name)
			}
			for i := range cfg.Contenders {
				k := (rep + i) % len(cfg.Contenders)
				c := cfg.Contenders[k]
				if cfg.Progress != nil {
					cfg.Progress(done, total, wl.Name+" / "+c.Name)
				}
				done++
				if len(got[k]) > 0 && (got[k][0].NA != "" || cfg.Alone) {
					continue // it cannot run this workload, or ran all its repetitions
				}
				first, last := rep, rep
				if cfg.Alone {
					first, last = 0, reps-1
				}
				res, err := runReps(wl, c, cfg, first, last)
				if err != nil {
					return out, fmt.Errorf("bench: %s on %s: %w", wl.Name, c.Name, err)
				}
				if len(res) > 0 && res[0].NA != "" {
					got[k] = res // n/a at any repetition: n/a for the workload
					continue
				}
				got[k] = append(got[k], res...)
			}
		}
		for _, rs := range got {
			out = append(out, rs...)
		}
	}
	if cfg.Progress != nil {
		cfg.Progress(total, total, "")
	}
	return out, nil
}

// runReps starts c, warms it up on wl at the repetitions' size unless
// cfg.Alone, runs repetitions first to last and stops c. The warm-up is
// the repetitions' size because a smaller one leaves a pool short of
// what a full-size run needs: a million spawned tasks grow a node's
// shard by about 20 MB of segments, which a pool warmed on fewer would
// allocate during the measured run.
func runReps(wl Workload, c Contender, cfg Config, first, last int) ([]Result, error) {
	r, err := start(c)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	sz := cfg.sizing()
	r.sizing = &sz
	notRun := func(err error) []Result {
		return []Result{{Workload: wl.Name, Contender: c.Name, Unit: wl.Unit, NA: strings.TrimPrefix(err.Error(), "n/a: ")}}
	}
	if !cfg.Alone {
		if _, _, err := wl.run(r, cfg.Scale); IsNA(err) {
			return notRun(err), nil
		} else if err != nil {
			return nil, err
		}
	}
	var out []Result
	for rep := first; rep <= last; rep++ {
		var before pool.Counters
		if r.p != nil {
			before = r.p.Stats().Total
		}
		r.facts = nil
		v, extra, err := wl.run(r, cfg.Scale)
		if IsNA(err) {
			return notRun(err), nil
		}
		if err != nil {
			return nil, err
		}
		res := Result{Workload: wl.Name, Contender: c.Name, Rep: rep, Value: v, Unit: wl.Unit, Extra: extra}
		if r.p != nil {
			d := r.p.Stats().Total.Sub(before)
			res.Stats = &d
		}
		res.Memory = r.facts
		out = append(out, res)
	}
	return out, nil
}

// Summary is one contender on one workload over its repetitions.
type Summary struct {
	Workload, Contender, Unit string
	Median, Min, Max          float64
	// VsBest is how many times better than the best contender of another
	// family in the same run (numapool's configurations are one family;
	// sequential is left to VsSequential): >1 means ahead of all of them.
	VsBest float64
	// VsSequential is the speedup over sequential, for time and
	// throughput figures; 0 when sequential was not run.
	VsSequential float64
	Extra        map[string]float64
	NA           string
	// Memory is a memory workload's sizing and placement (its first
	// repetition's), with LocalPct the median over the repetitions.
	Memory *MemoryFacts
}

// Summarize reduces the repetitions to medians and ratios.
func Summarize(results []Result, wls []Workload) []Summary {
	higher := map[string]bool{}
	for _, w := range wls {
		higher[w.Name] = w.Higher
	}
	type key struct{ w, c string }
	vals := map[key][]float64{}
	extras := map[key]map[string][]float64{}
	nas := map[key]string{}
	mems := map[key]*MemoryFacts{}
	locals := map[key][]float64{}
	var order []key
	for _, r := range results {
		k := key{r.Workload, r.Contender}
		if _, seen := vals[k]; !seen {
			if _, seenNA := nas[k]; !seenNA {
				order = append(order, k)
			}
		}
		if r.NA != "" {
			nas[k] = r.NA
			continue
		}
		vals[k] = append(vals[k], r.Value)
		if m := r.Memory; m != nil {
			if mems[k] == nil {
				mems[k] = m
			}
			if m.LocalPct != nil {
				locals[k] = append(locals[k], *m.LocalPct)
			}
		}
		if extras[k] == nil {
			extras[k] = map[string][]float64{}
		}
		for n, v := range r.Extra {
			extras[k][n] = append(extras[k][n], v)
		}
	}
	var out []Summary
	for _, k := range order {
		s := Summary{Workload: k.w, Contender: k.c, NA: nas[k]}
		for _, r := range results {
			if r.Workload == k.w {
				s.Unit = r.Unit
				break
			}
		}
		if v := vals[k]; len(v) > 0 {
			s.Median, s.Min, s.Max = median(v), slices.Min(v), slices.Max(v)
			s.Extra = map[string]float64{}
			for n, e := range extras[k] {
				s.Extra[n] = median(e)
			}
		}
		if m := mems[k]; m != nil {
			mc := *m
			mc.LocalPct = nil
			if l := locals[k]; len(l) > 0 {
				pct := median(l)
				mc.LocalPct = &pct
			}
			s.Memory = &mc
		}
		out = append(out, s)
	}
	better := func(a, b float64, hi bool) float64 { // how many times a beats b
		if a == 0 || b == 0 {
			return 0
		}
		if hi {
			return a / b
		}
		return b / a
	}
	for i := range out {
		s := &out[i]
		if s.NA != "" {
			continue
		}
		hi := higher[s.Workload]
		best := 0.0
		for _, o := range out {
			if o.Workload != s.Workload || o.Contender == s.Contender || o.NA != "" || o.Median == 0 {
				continue
			}
			if o.Contender == "sequential" {
				s.VsSequential = better(s.Median, o.Median, hi)
				continue
			}
			if family(o.Contender) == family(s.Contender) && s.Contender != "sequential" {
				continue
			}
			if best == 0 || better(o.Median, best, hi) > 1 {
				best = o.Median
			}
		}
		s.VsBest = better(s.Median, best, hi)
	}
	return out
}

// family groups numapool's configurations together.
func family(contender string) string {
	if strings.HasPrefix(contender, "numapool") {
		return "numapool"
	}
	return contender
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteTables prints one table per workload.
func WriteTables(w io.Writer, sums []Summary, wls []Workload) {
	WriteNotedTables(w, sums, wls, nil)
}

// WriteNotedTables is WriteTables with a line under a workload's title
// for each workload that notes has.
func WriteNotedTables(w io.Writer, sums []Summary, wls []Workload, notes map[string]string) {
	for _, wl := range wls {
		var rows []Summary
		for _, s := range sums {
			if s.Workload == wl.Name {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", heading(wl))
		if n := notes[wl.Name]; n != "" {
			fmt.Fprintf(w, "  (%s)\n", n)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  contender\tmedian\tmin-max\tvs best other\tvs sequential\textra")
		for _, s := range rows {
			if s.NA != "" {
				fmt.Fprintf(tw, "  %s\tn/a\t\t\t\t%s\n", s.Contender, s.NA)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s-%s\t%s\t%s\t%s\n", s.Contender, num(s.Median), num(s.Min), num(s.Max),
				ratio(s.VsBest), ratio(s.VsSequential), extras(s.Extra))
		}
		tw.Flush()
		if v, ok := verdictOf(rows, wl); ok {
			fmt.Fprintf(w, "  %s\n", verdictLine(v))
		}
		writeMemory(w, wl, rows)
	}
}

// writeMemory prints, for a memory workload, what its arrays were sized
// against and a locality table with a figure for every contender that
// ran it.
func writeMemory(w io.Writer, wl Workload, rows []Summary) {
	first := firstMemory(rows)
	if first == nil {
		return
	}
	fmt.Fprintf(w, "  arrays: %s together, sized against %s of last-level cache (%.1fx it; memory budget %s)\n",
		bytesText(first.Bytes), bytesText(first.LLCBytes), float64(first.Bytes)/float64(max(first.LLCBytes, 1)), bytesText(first.BudgetBytes))
	fmt.Fprintf(w, "\n%s locality: share of the bytes of one untimed pass processed on the node that holds them\n", wl.Name)
	fmt.Fprintln(w, "  (a chunk runs on the node its thread reports (pin.CurrentCPU) at both its start and its end; its pages are sampled")
	fmt.Fprintln(w, "  at its first, middle and last element of each array with move_pages)")
	if first.MemoryNodes <= 1 {
		fmt.Fprintln(w, "  (one memory node: every byte is on the node that processes it, so this machine cannot tell the contenders apart)")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  contender\tlocal\tallocation")
	for _, s := range rows {
		switch {
		case s.NA != "":
			continue
		case s.Memory == nil:
			fmt.Fprintf(tw, "  %s\t-\t\n", s.Contender)
		case s.Memory.LocalPct == nil:
			fmt.Fprintf(tw, "  %s\tnot measured\t%s\n", s.Contender, s.Memory.Allocation)
		default:
			fmt.Fprintf(tw, "  %s\t%.1f %%\t%s\n", s.Contender, *s.Memory.LocalPct, s.Memory.Allocation)
		}
	}
	tw.Flush()
}

// bytesText gives a size in binary units with one decimal.
func bytesText(b int64) string {
	switch {
	case b >= 1<<30:
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + " GiB"
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
	case b >= 1<<10:
		return strconv.FormatFloat(float64(b)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(b, 10) + " B"
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "x"
}

func extras(m map[string]float64) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" "+num(m[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes every repetition as a JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// WriteCSV writes one row per repetition, with numapool's counters.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	names, _ := counterColumns(nil)
	head := append([]string{"workload", "contender", "rep", "value", "unit", "na", "extra"}, names...)
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range results {
		row := []string{r.Workload, r.Contender, strconv.Itoa(r.Rep), strconv.FormatFloat(r.Value, 'g', 6, 64), r.Unit, r.NA, extras(r.Extra)}
		_, values := counterColumns(r.Stats)
		row = append(row, values...)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// SelectWorkloads returns the workloads named in a comma-separated list
// ("" for all), or an error naming an unknown one.
func SelectWorkloads(names string) ([]Workload, error) {
	all := Workloads()
	if names == "" {
		return all, nil
	}
	var out []Workload
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(w Workload) bool { return w.Name == n })
		if i < 0 {
			var have []string
			for _, w := range all {
				have = append(have, w.Name)
			}
			return nil, fmt.Errorf("bench: unknown workload %q (have %s)", n, strings.Join(have, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// counterColumns returns the names of pool.Counters' fields as their JSON
// names, and c's values as text ("" for each when c is nil), in field
// order: every counter the pool has, so a new one gets its column.
func counterColumns(c *pool.Counters) (names, values []string) {
	t := reflect.TypeFor[pool.Counters]()
	for i := range t.NumField() {
		names = append(names, strings.Split(t.Field(i).Tag.Get("json"), ",")[0])
		v := ""
		if c != nil {
			v = strconv.FormatUint(reflect.ValueOf(*c).Field(i).Uint(), 10)
		}
		values = append(values, v)
	}
	return names, values
}

// firstMemory returns the memory facts of the first of rows that has
// them (every contender of a memory workload is sized alike), or nil.
func firstMemory(rows []Summary) *MemoryFacts {
	for _, s := range rows {
		if s.Memory != nil {
			return s.Memory
		}
	}
	return nil
}

// heading is a workload's table heading: its name, what it does, its
// unit and which way is better.
func heading(wl Workload) string {
	dir := "lower is better"
	if wl.Higher {
		dir = "higher is better"
	}
	return fmt.Sprintf("%s: %s (%s, %s)", wl.Name, wl.About, wl.Unit, dir)
}
