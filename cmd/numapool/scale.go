package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/numapool/numapool/bench"
	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/topology"
)

// The study's defaults: workloads that scale with the CPUs (compute
// bound, fork-join, irregular, memory bound) and numapool in both
// stealing modes, the goroutine version and one other pool, against
// sequential code.
var (
	scaleDefaultWorkloads  = []string{"reduce", "fib-12", "uts", "triad"}
	scaleDefaultContenders = []string{"numapool", "numapool-flat", "goroutines", "pond", "sequential"}
)

// boundContender runs the locality bound: a goroutine per chunk, whose
// pages go where the inherited memory policy puts them and nowhere else.
const boundContender = "goroutines"

// pointOutput is what `bench --point` prints: the results and the CPUs
// and GOMAXPROCS the process really had, which the study checks against
// its plan.
type pointOutput struct {
	Allowed    topology.CPUSet `json:"allowed"`
	GOMAXPROCS int             `json:"gomaxprocs"`
	Results    []bench.Result  `json:"results"`
}

// selectSuite checks the flags the suite, its points and the study share.
func selectSuite(o benchOpts, defWorkloads, defContenders string) (wls []bench.Workload, cs []bench.Contender, scale float64, err error) {
	if *o.reps < 1 || *o.reps > 1000 {
		return nil, nil, 0, usageError{fmt.Sprintf("--reps %d: want 1..1000", *o.reps)}
	}
	if scale, err = parseScale(*o.size); err != nil {
		return nil, nil, 0, err
	}
	names := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	if wls, err = bench.SelectWorkloads(names(*o.workloads, defWorkloads)); err != nil {
		return nil, nil, 0, usageError{err.Error()}
	}
	if cs, err = bench.Select(bench.Contenders(*o.spec), names(*o.contenders, defContenders)); err != nil {
		return nil, nil, 0, usageError{err.Error()}
	}
	return wls, cs, scale, nil
}

// pointCmd runs one point of a study in this process, which the study
// started bound to the point's CPUs with GOMAXPROCS set.
func pointCmd(o benchOpts, stdout io.Writer) error {
	wls, cs, scale, err := selectSuite(o, "", "")
	if err != nil {
		return err
	}
	if *o.spec != "" {
		if _, err := topology.Synthetic(*o.spec, topology.Discover()); err != nil {
			return usageError{"--spec: " + err.Error()}
		}
	}
	results, err := bench.Run(bench.Config{Workloads: wls, Contenders: cs, Reps: *o.reps, Scale: scale})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(pointOutput{Allowed: topology.Discover().Allowed, GOMAXPROCS: runtime.GOMAXPROCS(0), Results: results})
}

// studyPlan is everything a study will run.
type studyPlan struct {
	t         *topology.Topology
	synthetic bool
	placement bench.Placement
	workloads []bench.Workload
	cs        []bench.Contender
	points    []bench.ScalePoint
	bounds    []boundPlan
	notes     []string
}

// boundPlan is one locality bound: the workload on the CPUs of cpuNode,
// its memory bound to cpuNode and then to farNode.
type boundPlan struct {
	workload        bench.Workload
	cpuNode         int
	farNode         int
	distance        int
	cpus, osCPUs    topology.CPUSet
	local, far      topology.CPUSet // memory nodes
	memoryAvailable bool            // false on a synthetic topology: planned, not run
}

// scaleCmd is `numapool bench --scale`.
func scaleCmd(o benchOpts, stdout io.Writer) error {
	pl, err := bench.ParsePlacement(*o.placement)
	if err != nil {
		return usageError{"--placement: " + err.Error()}
	}
	if *o.maxCPUs < 0 {
		return usageError{fmt.Sprintf("--max-cpus %d: want 0 (all) or more", *o.maxCPUs)}
	}
	if *o.plot != "" && !strings.HasSuffix(*o.plot, ".svg") {
		return usageError{fmt.Sprintf("--plot %q: only SVG is written; name the file *.svg", *o.plot)}
	}
	wls, cs, _, err := selectSuite(o, strings.Join(scaleDefaultWorkloads, ","), strings.Join(scaleDefaultContenders, ","))
	if err != nil {
		return err
	}
	if err := noDuplicates(wls, cs); err != nil {
		return err
	}
	if !slices.ContainsFunc(cs, func(c bench.Contender) bool { return c.Name == "sequential" }) {
		all, _ := bench.Select(bench.Contenders(*o.spec), "sequential")
		cs = append(cs, all...) // the baseline of every speedup
	}
	real := topology.Discover()
	t := real
	if *o.spec != "" {
		if t, err = topology.Synthetic(*o.spec, real); err != nil {
			return usageError{"--spec: " + err.Error()}
		}
	}
	plan := makePlan(t, *o.spec != "", pl, *o.maxCPUs, wls, cs)
	if *o.dryRun {
		writePlan(stdout, plan, o)
		return nil
	}
	if plan.synthetic {
		if n := plan.points[len(plan.points)-1]; n.OSCPUs.Len() != n.CPUs.Len() {
			return usageError{fmt.Sprintf("--spec %s has %s and this process may use %d: a study runs only on CPUs it has (--dry-run shows the plan)",
				*o.spec, plural(n.CPUs.Len(), "CPU"), real.Allowed.Len())}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("scale: finding this program to run each point: %w", err)
	}
	rep := bench.ScaleReport{Placement: pl.String(), Size: *o.size, Reps: *o.reps, Points: plan.points, Notes: plan.notes}
	byPoint := map[int][]bench.Result{}
	for i, p := range plan.points {
		progress(fmt.Sprintf("point %d of %d: %s (%s)", i+1, len(plan.points), plural(p.Workers, "CPU"), p.OSCPUs))
		out, err := runPoint(exe, pointArgs(plan, o, p, i == 0), p.OSCPUs, topology.CPUSet{}, p.Workers)
		if err != nil {
			return fmt.Errorf("scale: point of %s: %w", plural(p.Workers, "CPU"), err)
		}
		byPoint[p.Workers] = out.Results
	}
	rep.Rows = bench.ScaleRows(byPoint, wls)
	for _, b := range plan.bounds {
		if !b.memoryAvailable {
			continue
		}
		progress(fmt.Sprintf("locality bound: %s on node %d, memory on node %d and on node %d", b.workload.Name, b.cpuNode, b.cpuNode, b.farNode))
		lb, err := runBound(exe, plan, o, b)
		if err != nil {
			return fmt.Errorf("scale: locality bound of %s: %w", b.workload.Name, err)
		}
		rep.Bounds = append(rep.Bounds, lb)
	}
	if *o.plot != "" {
		if err := writeFile(*o.plot, func(w io.Writer) error { return bench.WriteScaleSVG(w, rep, wls) }); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if *o.asJSON {
		return bench.WriteScaleJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "numapool bench --scale: %s allowed (%s) on %s, %s; size %s, %s per point\n",
		plural(t.Allowed.Len(), "CPU"), t.Allowed, plural(len(t.ComputeNodes()), "node"), bench.PlacementAbout(pl), *o.size, plural(*o.reps, "rep"))
	for _, p := range plan.points {
		fmt.Fprintf(stdout, "  %s: %s (%s), GOMAXPROCS %d\n", plural(p.Workers, "CPU"), p.OSCPUs, nodesOf(p), p.Workers)
	}
	bench.WriteScaleTables(stdout, rep, wls)
	return nil
}

func noDuplicates(wls []bench.Workload, cs []bench.Contender) error {
	for i, w := range wls {
		if slices.ContainsFunc(wls[:i], func(x bench.Workload) bool { return x.Name == w.Name }) {
			return usageError{fmt.Sprintf("--workload: %s is named twice", w.Name)}
		}
	}
	for i, c := range cs {
		if slices.ContainsFunc(cs[:i], func(x bench.Contender) bool { return x.Name == c.Name }) {
			return usageError{fmt.Sprintf("--contender: %s is named twice", c.Name)}
		}
	}
	return nil
}

// makePlan lays out the points and the locality bounds.
func makePlan(t *topology.Topology, synthetic bool, pl bench.Placement, maxCPUs int, wls []bench.Workload, cs []bench.Contender) studyPlan {
	plan := studyPlan{t: t, synthetic: synthetic, placement: pl, workloads: wls, cs: cs, points: bench.ScalePlan(t, pl, maxCPUs)}
	var memWls []bench.Workload
	for _, w := range wls {
		if bench.MemoryBound(w.Name) {
			memWls = append(memWls, w)
		}
	}
	if len(memWls) == 0 {
		return plan
	}
	nodes := t.ComputeNodes()
	near := nodes[0]
	var far topology.Node
	farDist := -1
	for _, n := range t.Nodes {
		hasMemory := n.HasMemory && n.Allowed || synthetic && n.HasCPUs
		if n.ID == near.ID || !hasMemory {
			continue
		}
		d, _ := t.Distances.Between(near.ID, n.ID)
		if d > farDist {
			far, farDist = n, d
		}
	}
	switch {
	case farDist < 0:
		plan.notes = append(plan.notes, fmt.Sprintf("the locality bound of %s cannot be measured here: this process has memory on one node only, so no memory is remote", names(memWls)))
		return plan
	case !synthetic && !(near.HasMemory && near.Allowed):
		plan.notes = append(plan.notes, fmt.Sprintf("the locality bound of %s cannot be measured here: node %d, which runs the bound, has no memory of its own", names(memWls), near.ID))
		return plan
	case synthetic:
		plan.notes = append(plan.notes, fmt.Sprintf("the locality bound of %s is planned, not run: synthetic nodes have no memory of their own", names(memWls)))
	}
	for _, w := range memWls {
		plan.bounds = append(plan.bounds, boundPlan{
			workload: w, cpuNode: near.ID, farNode: far.ID, distance: max(farDist, 0),
			cpus: near.CPUs, osCPUs: t.OSCPUs(near.CPUs),
			local: topology.NewCPUSet(near.ID), far: topology.NewCPUSet(far.ID), memoryAvailable: !synthetic,
		})
	}
	return plan
}

func names(wls []bench.Workload) string {
	var s []string
	for _, w := range wls {
		s = append(s, w.Name)
	}
	return strings.Join(s, ", ")
}

// pointArgs is the command line of one point's process. Sequential runs
// at the first point only: it is the baseline, and more CPUs do not
// change it. A synthetic topology is handed on as the point's own OS CPUs
// per synthetic node, so that the point's pool has the point's CPUs.
func pointArgs(plan studyPlan, o benchOpts, p bench.ScalePoint, first bool) []string {
	var cs []string
	for _, c := range plan.cs {
		if c.Name != "sequential" || first {
			cs = append(cs, c.Name)
		}
	}
	args := []string{"bench", "--point", "--workload", strings.ReplaceAll(names(plan.workloads), ", ", ","), "--contender", strings.Join(cs, ","),
		"--reps", strconv.Itoa(*o.reps), "--size", *o.size}
	if plan.synthetic {
		args = append(args, "--spec", pointSpec(plan.t, p.CPUs))
	}
	return args
}

// pointSpec writes the synthetic nodes' CPUs among cpus in the explicit
// form ("0-1;2-3", OS CPUs per node), leaving out nodes without any.
func pointSpec(t *topology.Topology, cpus topology.CPUSet) string {
	var parts []string
	for _, n := range t.ComputeNodes() {
		if in := n.CPUs.And(cpus); !in.IsEmpty() {
			parts = append(parts, t.OSCPUs(in).String())
		}
	}
	return strings.Join(parts, ";")
}

// runPoint runs `numapool bench --point` bound to cpus with GOMAXPROCS
// procs and, when mem is not empty, its memory bound to the nodes in mem;
// it checks that the process had the CPUs and GOMAXPROCS asked for.
func runPoint(exe string, args []string, cpus, mem topology.CPUSet, procs int) (pointOutput, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := startBound(cmd, cpus, mem); err != nil {
		return pointOutput{}, err
	}
	if err := cmd.Wait(); err != nil {
		return pointOutput{}, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	var po pointOutput
	if err := json.Unmarshal(out.Bytes(), &po); err != nil {
		return pointOutput{}, fmt.Errorf("reading its output: %w", err)
	}
	if !po.Allowed.Equal(cpus) || po.GOMAXPROCS != procs {
		return pointOutput{}, fmt.Errorf("the process ran on CPUs %s with GOMAXPROCS %d, not on %s with %d", po.Allowed, po.GOMAXPROCS, cpus, procs)
	}
	return po, nil
}

// startBound starts cmd with its CPU affinity set to cpus and, when mem
// is not empty, its memory policy bound to the nodes in mem. Both are set
// on a locked thread that then forks the child (os/exec forks from the
// calling thread), and a child inherits both across fork and exec: every
// thread of the child has them from its first instruction, which setting
// them on a running child cannot give. The thread runs a goroutine of its
// own, so that if its mask cannot be put back it ends with that goroutine
// instead of returning to the runtime narrowed.
func startBound(cmd *exec.Cmd, cpus, mem topology.CPUSet) error {
	done := make(chan error, 1)
	go func() {
		th, err := pin.Lock(cpus)
		if err != nil {
			done <- err
			return
		}
		if !mem.IsEmpty() {
			if err := pin.SetMemPolicy(pin.Bind, mem); err != nil {
				_ = th.Restore()
				done <- err
				return
			}
		}
		err = cmd.Start()
		if !mem.IsEmpty() {
			if perr := pin.SetMemPolicy(pin.Default, topology.CPUSet{}); perr != nil {
				done <- err // the thread keeps the policy and ends with its goroutine
				return
			}
		}
		_ = th.Restore()
		done <- err
	}()
	return <-done
}

// runBound measures one locality bound: the workload on the bound's
// CPUs, its memory on their node and on the far node, alternately, two
// processes each.
func runBound(exe string, plan studyPlan, o benchOpts, b boundPlan) (bench.LocalityBound, error) {
	args := []string{"bench", "--point", "--workload", b.workload.Name, "--contender", boundContender,
		"--reps", strconv.Itoa(*o.reps), "--size", *o.size}
	var local, remote []bench.Result
	for range 2 {
		for _, mem := range []topology.CPUSet{b.local, b.far} {
			po, err := runPoint(exe, args, b.osCPUs, mem, b.cpus.Len())
			if err != nil {
				return bench.LocalityBound{}, err
			}
			if mem.Equal(b.local) {
				local = append(local, po.Results...)
			} else {
				remote = append(remote, po.Results...)
			}
		}
	}
	med := func(rs []bench.Result) float64 {
		s := bench.Summarize(rs, []bench.Workload{b.workload})
		if len(s) == 0 {
			return 0
		}
		return s[0].Median
	}
	lb := bench.LocalityBound{Workload: b.workload.Name, Contender: boundContender, Unit: b.workload.Unit, Workers: b.cpus.Len(),
		CPUNode: b.cpuNode, FarNode: b.farNode, Distance: b.distance, Local: med(local), Remote: med(remote)}
	if lb.Local > 0 && lb.Remote > 0 {
		if b.workload.Higher {
			lb.Gain = lb.Local / lb.Remote
		} else {
			lb.Gain = lb.Remote / lb.Local
		}
	}
	return lb, nil
}

// writePlan prints what a study would run, as shell commands with the
// same effect (the study sets the mask and memory policy itself and needs
// neither taskset nor numactl).
func writePlan(w io.Writer, plan studyPlan, o benchOpts) {
	t := plan.t
	what := "this machine"
	if plan.synthetic {
		what = "the synthetic topology " + *o.spec
	}
	fmt.Fprintf(w, "numapool bench --scale --dry-run: %s on %s: %s allowed on %s\n",
		plural(len(plan.points), "point"), what, plural(t.Allowed.Len(), "CPU"), plural(len(t.ComputeNodes()), "node"))
	fmt.Fprintf(w, "placement %s\n", bench.PlacementAbout(plan.placement))
	var cs []string
	for _, c := range plan.cs {
		cs = append(cs, c.Name)
	}
	fmt.Fprintf(w, "workloads %s; contenders %s (sequential at the first point only); %s, size %s per point\n\n",
		names(plan.workloads), strings.Join(cs, ", "), plural(*o.reps, "rep"), *o.size)
	for i, p := range plan.points {
		fmt.Fprintf(w, "point %d: %s on %s: CPUs %s", i+1, plural(p.Workers, "CPU"), nodesOf(p), p.CPUs)
		if plan.synthetic {
			fmt.Fprintf(w, " (OS CPUs %s)", p.OSCPUs)
		}
		fmt.Fprintf(w, "\n  GOMAXPROCS=%d taskset -c %s numapool %s\n", p.Workers, p.OSCPUs, shellJoin(pointArgs(plan, o, p, i == 0)))
	}
	for _, b := range plan.bounds {
		fmt.Fprintf(w, "locality bound of %s: node %d's %s, memory bound to node %d, then to node %d (distance %d), twice each in turn:\n",
			b.workload.Name, b.cpuNode, plural(b.cpus.Len(), "CPU"), b.cpuNode, b.farNode, b.distance)
		for _, mem := range []int{b.cpuNode, b.farNode} {
			fmt.Fprintf(w, "  GOMAXPROCS=%d taskset -c %s numactl --membind=%d numapool bench --point --workload %s --contender %s --reps %d --size %s\n",
				b.cpus.Len(), b.osCPUs, mem, b.workload.Name, boundContender, *o.reps, *o.size)
		}
	}
	if last := plan.points[len(plan.points)-1]; last.OSCPUs.Len() < last.CPUs.Len() {
		fmt.Fprintf(w, "note: the synthetic CPUs wrap onto this process's %s: the plan can be shown here, not run\n", plural(last.OSCPUs.Len(), "CPU"))
	}
	for _, n := range plan.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// nodesOf writes a point's nodes: "node 0", "nodes 0,1".
func nodesOf(p bench.ScalePoint) string {
	if len(p.Nodes) == 1 {
		return "node " + bench.NodesOf(p)
	}
	return "nodes " + bench.NodesOf(p)
}

// plural writes "1 CPU", "2 CPUs".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// shellJoin joins args as a shell would read them back, quoting those
// with characters the shell treats specially (a spec's ";").
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " ;&|<>()$`\\\"'*?[]#~!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// progress says on a terminal which point is running.
func progress(msg string) {
	if isTerminal(os.Stderr) {
		fmt.Fprintf(os.Stderr, "numapool bench --scale: %s\n", msg)
	}
}

// writeFile creates name and writes it with write.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
