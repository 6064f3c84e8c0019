package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/numapool/numapool/topology"
)

// A scaling study runs workloads at 1, 2, 4, ... CPUs, each point in a
// process of its own bound to the point's CPUs with GOMAXPROCS set to
// their count, so that every contender of the point gets the same CPUs
// and the same number of Ps. This file plans the points and reduces their
// results; the CLI starts the processes.

// Placement says which CPUs a point of k CPUs gets.
type Placement int

const (
	// Compact fills the first node before the next: its CPUs one per
	// core first, then the cores' further SMT threads; then node 2, and
	// so on. A point uses as few nodes as it can.
	Compact Placement = iota
	// Scatter takes CPUs round robin over the nodes, each node's in the
	// order Compact takes them: a point of k CPUs spans min(k, nodes)
	// nodes.
	Scatter
)

func (p Placement) String() string {
	if p == Scatter {
		return "scatter"
	}
	return "compact"
}

// ParsePlacement reads "compact" or "scatter".
func ParsePlacement(s string) (Placement, error) {
	switch s {
	case "compact":
		return Compact, nil
	case "scatter":
		return Scatter, nil
	}
	return 0, fmt.Errorf("bench: placement %q: want compact or scatter", s)
}

// MemoryBound reports whether a workload's speed is set by memory
// bandwidth, so that where its pages are decides it: the study measures
// the local-versus-remote bound for these.
func MemoryBound(workload string) bool { return workload == "triad" }

// ScalePoint is one point of a study.
type ScalePoint struct {
	Workers int             `json:"workers"` // CPUs, and GOMAXPROCS
	CPUs    topology.CPUSet `json:"cpus"`    // the topology's CPU IDs
	OSCPUs  topology.CPUSet `json:"os_cpus"` // what the process is bound to
	Nodes   []int           `json:"nodes"`   // the nodes the CPUs are on
}

// ScalePlan returns the points of a study on t: 1, 2, 4, ... CPUs and
// then all of them (at most maxCPUs when it is positive), each point's
// CPUs chosen by pl from t's allowed CPUs.
func ScalePlan(t *topology.Topology, pl Placement, maxCPUs int) []ScalePoint {
	order := cpuOrder(t, pl)
	n := len(order)
	if maxCPUs > 0 {
		n = min(n, maxCPUs)
	}
	var ks []int
	for k := 1; k < n; k *= 2 {
		ks = append(ks, k)
	}
	if n > 0 {
		ks = append(ks, n)
	}
	var out []ScalePoint
	for _, k := range ks {
		p := ScalePoint{Workers: k}
		for _, id := range order[:k] {
			p.CPUs.Add(id)
			c, _ := t.CPU(id)
			p.OSCPUs.Add(c.OS)
			if !slices.Contains(p.Nodes, c.Node) {
				p.Nodes = append(p.Nodes, c.Node)
			}
		}
		slices.Sort(p.Nodes)
		out = append(out, p)
	}
	return out
}

// cpuOrder lists t's allowed CPUs in the order pl hands them out.
func cpuOrder(t *topology.Topology, pl Placement) []int {
	var perNode [][]int
	for _, n := range t.ComputeNodes() {
		ids := n.CPUs.List()
		thread := func(id int) int { // which SMT thread of its core id is
			c, _ := t.CPU(id)
			return max(slices.Index(c.Siblings.List(), id), 0)
		}
		slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(thread(a), thread(b)) })
		perNode = append(perNode, ids)
	}
	var out []int
	if pl == Compact {
		for _, ids := range perNode {
			out = append(out, ids...)
		}
		return out
	}
	for i := 0; ; i++ {
		added := false
		for _, ids := range perNode {
			if i < len(ids) {
				out = append(out, ids[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// ScaleRow is one contender on one workload at one point.
type ScaleRow struct {
	Workload  string  `json:"workload"`
	Contender string  `json:"contender"`
	Workers   int     `json:"workers"`
	Unit      string  `json:"unit"`
	Median    float64 `json:"median"`
	Min       float64 `json:"min"`
	Max       float64 `json:"max"`
	// Speedup is how many times faster than sequential on one CPU (for a
	// throughput, the ratio of throughputs); 0 when sequential did not run.
	Speedup float64 `json:"speedup,omitempty"`
	// Efficiency is Speedup per worker: 1 is perfect scaling.
	Efficiency float64 `json:"efficiency,omitempty"`
	NA         string  `json:"na,omitempty"`
}

// LocalityBound is a memory-bound workload run on one node's CPUs with
// all its memory bound to that node (Local) and then to the node
// farthest from it (Remote): Gain is the most that placing memory well
// can give on this machine, Local over Remote.
type LocalityBound struct {
	Workload  string  `json:"workload"`
	Contender string  `json:"contender"`
	Unit      string  `json:"unit"`
	Workers   int     `json:"workers"`
	CPUNode   int     `json:"cpu_node"`
	FarNode   int     `json:"far_node"`
	Distance  int     `json:"distance,omitempty"`
	Local     float64 `json:"local"`
	Remote    float64 `json:"remote"`
	Gain      float64 `json:"gain"`
}

// ScaleReport is a whole study.
type ScaleReport struct {
	Placement string          `json:"placement"`
	Size      string          `json:"size"`
	Reps      int             `json:"reps"`
	Points    []ScalePoint    `json:"points"`
	Rows      []ScaleRow      `json:"rows"`
	Bounds    []LocalityBound `json:"locality_bounds,omitempty"`
	// Notes say what the study could not measure and why.
	Notes []string `json:"notes,omitempty"`
}

// ScaleRows reduces each point's repetitions (results by worker count)
// to rows in the order of wls, then of the contenders as they came,
// then of the points; sequential at the smallest point is the baseline.
func ScaleRows(byPoint map[int][]Result, wls []Workload) []ScaleRow {
	var ks []int
	for k := range byPoint {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	var rows []ScaleRow
	for _, wl := range wls {
		var contenders []string
		for _, k := range ks {
			for _, r := range byPoint[k] {
				if r.Workload == wl.Name && !slices.Contains(contenders, r.Contender) {
					contenders = append(contenders, r.Contender)
				}
			}
		}
		base := 0.0
		for _, c := range contenders {
			for _, k := range ks {
				s, ok := summarizeOne(byPoint[k], wl.Name, c)
				if !ok {
					continue
				}
				row := ScaleRow{Workload: wl.Name, Contender: c, Workers: k, Unit: wl.Unit, NA: s.NA,
					Median: s.Median, Min: s.Min, Max: s.Max}
				if c == "sequential" && base == 0 && s.NA == "" {
					base = s.Median
				}
				rows = append(rows, row)
			}
		}
		for i := range rows {
			r := &rows[i]
			if r.Workload != wl.Name || r.NA != "" || base == 0 || r.Median == 0 {
				continue
			}
			if wl.Higher {
				r.Speedup = r.Median / base
			} else {
				r.Speedup = base / r.Median
			}
			r.Efficiency = r.Speedup / float64(r.Workers)
		}
	}
	return rows
}

// summarizeOne is Summarize for one workload and contender.
func summarizeOne(results []Result, workload, contender string) (Summary, bool) {
	var mine []Result
	for _, r := range results {
		if r.Workload == workload && r.Contender == contender {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return Summary{}, false
	}
	return Summarize(mine, nil)[0], true
}

// WriteScaleTables prints one table per workload: a row per contender
// and point with the figure, speedup and efficiency, then the locality
// bounds and the notes.
func WriteScaleTables(w io.Writer, rep ScaleReport, wls []Workload) {
	for _, wl := range wls {
		var rows []ScaleRow
		for _, r := range rep.Rows {
			if r.Workload == wl.Name {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", heading(wl))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  contender\tworkers\tmedian %s\tmin-max\tspeedup\tefficiency\n", wl.Unit)
		for _, r := range rows {
			if r.NA != "" {
				fmt.Fprintf(tw, "  %s\t%d\tn/a\t\t\t%s\n", r.Contender, r.Workers, r.NA)
				continue
			}
			eff := "-"
			if r.Efficiency > 0 {
				eff = fmt.Sprintf("%.0f%%", 100*r.Efficiency)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s-%s\t%s\t%s\n", r.Contender, r.Workers, num(r.Median), num(r.Min), num(r.Max), ratio(r.Speedup), eff)
		}
		tw.Flush()
	}
	if len(rep.Bounds) > 0 {
		fmt.Fprintln(w, "\nlocality bound: one node's CPUs, all memory on that node, then on the farthest node")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  workload\tcontender\tworkers\tCPUs on\tlocal\tremote (node, distance)\tgain")
		for _, b := range rep.Bounds {
			fmt.Fprintf(tw, "  %s\t%s\t%d\tnode %d\t%s %s\t%s (node %d, %d)\t%s\n", b.Workload, b.Contender, b.Workers, b.CPUNode,
				num(b.Local), b.Unit, num(b.Remote), b.FarNode, b.Distance, ratio(b.Gain))
		}
		tw.Flush()
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	fmt.Fprintln(w, "\nspeedup: how many times faster than sequential code on one CPU;")
	fmt.Fprintln(w, "efficiency: speedup per worker (100% is perfect scaling).")
}

// WriteScaleJSON writes the whole study as one JSON object.
func WriteScaleJSON(w io.Writer, rep ScaleReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// PlacementAbout says in words which CPUs a placement gives a point.
func PlacementAbout(pl Placement) string {
	if pl == Scatter {
		return "scatter: CPUs round robin over the nodes, each node's one per core before the cores' second threads"
	}
	return "compact: the first node's CPUs (one per core, then the cores' second threads), then the next node's"
}

// NodesOf formats a point's nodes, "0" or "0,1".
func NodesOf(p ScalePoint) string {
	s := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
