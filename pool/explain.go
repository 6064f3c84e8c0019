package pool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Explain describes the pool's placement for people, as
// OMP_DISPLAY_AFFINITY does: the topology it was built on, each node
// domain and its workers with their CPUs and binding, the victim order,
// and what was degraded and why; then, when something narrowed the
// process's CPUs, where they came from (launch.Detect: Slurm, Open MPI, a
// cgroup cpuset, an affinity mask) and a warning for each setting of the
// pool that contradicts it (launch.Info.Warnings).
func (p *Pool) Explain() string {
	var b strings.Builder
	t := p.topo
	fmt.Fprintf(&b, "numapool: %s on %s; topology %s; binding %s; stealing %s\n",
		plural(len(p.workers), "worker"), plural(len(p.domains), "node"), t.Source, p.cfg.binding, p.cfg.mode)
	interval := fmt.Sprintf("self-tuned (start %d, %d..%d, ~%v of work)", initialInterval, minInterval, maxInterval, targetLookEvery)
	if p.cfg.interval > 0 {
		interval = fmt.Sprint(p.cfg.interval)
	}
	fmt.Fprintf(&b, "fairness interval: %s; shard bound: %s; wait policy: %s\n",
		interval, boundText(p.cfg.shardBound), blockTimeText(p.cfg.spinFor()))
	if strings.HasPrefix(t.Source, "synthetic:") {
		fmt.Fprintf(&b, "memory: synthetic nodes have none of their own; AllocOnNode places a node's on the real node its CPUs are on (memory nodes %s), and a page first touched by a worker lands on the real node of its OS CPU\n", t.AllowedMems)
	}
	p.placer.ReportNodes(&b)
	for _, n := range p.notes {
		fmt.Fprintf(&b, "%s\n", n)
	}
	for _, w := range p.placer.SlowKindWarnings() {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	for _, w := range p.cfg.envWarnings {
		fmt.Fprintf(&b, "environment: %s\n", w)
	}
	p.degradedMu.Lock()
	degraded := slices.Clone(p.degraded)
	p.degradedMu.Unlock()
	p.placer.Report(&b)
	degraded = append(degraded, p.placer.Degraded()...)
	if len(degraded) == 0 {
		b.WriteString("degraded: nothing\n")
	} else {
		b.WriteString("degraded:\n")
		for _, d := range degraded {
			fmt.Fprintf(&b, "  - %s\n", d)
		}
	}
	p.placer.ReportLaunch(&b)
	if ids := p.retiredIDs(); ids != "" {
		fmt.Fprintf(&b, "resized: %d of %s run; retired: workers %s (in reserve: WithMaxWorkers, Resize)\n", p.idle.n.Load(), plural(len(p.workers), "worker"), ids)
	}
	if p.blocked.every > 0 {
		var now, started, refused uint64
		for _, d := range p.domains {
			now += uint64(p.standInsOf(d).now.Load())
			started += p.standInsOf(d).started.Load()
			refused += p.standInsOf(d).refused.Load()
		}
		fmt.Fprintf(&b, "block watch: every %s; %s standing in for blocked ones now, %d started, %d wanted beyond the reserve\n",
			p.blocked.every, plural(int(now), "worker"), started, refused)
	}
	if rep := p.stuck.report.Load(); rep != nil {
		fmt.Fprintf(&b, "stuck: %s\n", p.stuckText(rep))
	}
	return b.String()
}

func boundText(n int) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n, " tasks per node")
}

func blockTimeText(d time.Duration) string {
	switch {
	case d < 0:
		return "active, idle workers never sleep"
	case d == 0:
		return "passive, idle workers sleep at once"
	}
	return fmt.Sprintf("passive, idle workers sleep after %v", d)
}

// noteDegraded records what no longer holds of the plan, for Explain.
func (p *sched) noteDegraded(err error) {
	p.degradedMu.Lock()
	p.degraded = append(p.degraded, err.Error())
	p.degradedMu.Unlock()
}

// retiredIDs lists the retired workers' IDs, as Explain shows them:
// "2-3,6-7"; "" when none is.
func (p *sched) retiredIDs() string {
	retired := p.idle.retiredNow()
	var b strings.Builder
	for id := 0; id < len(retired); id++ {
		if !retired[id] {
			continue
		}
		last := id
		for last+1 < len(retired) && retired[last+1] {
			last++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(id))
		if last > id {
			b.WriteString("-" + strconv.Itoa(last))
		}
		id = last
	}
	return b.String()
}
