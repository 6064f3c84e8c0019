package pool

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/place"
	"github.com/numapool/numapool/pool/internal/settings"
	"github.com/numapool/numapool/steal"
	"github.com/numapool/numapool/topology"
)

// An Option configures New. Options are validated by New, which returns
// an error naming the bad value; explicit options win over the
// environment.
type Option interface {
	apply(*config) error
}

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	workers       int // 0: default
	workersSet    bool
	maxWorkers    int    // 0: as many as start (WithMaxWorkers)
	maxWorkersEnv string // NUMAPOOL_MAX_WORKERS, when maxWorkers came from it
	maxWorkersSet bool
	binding       pin.Binding
	bindingSet    bool
	kind          string // WithCPUKind: "performance" or "efficiency"; "": every kind
	kindSet       bool
	kindEnv       string // NUMAPOOL_PLACES, when kind came from it
	mode          steal.Mode
	modeSet       bool
	spec          string
	topo          *topology.Topology
	nodes         []int // restrict to these OS node IDs; nil: all
	nodesSet      bool
	required      bool // WithRequiredPlacement
	panicHandler  func(value any, stack []byte)
	shardBound    int
	interval      int  // fairness interval; 0: self-tuned
	crossLoops    bool // WithCrossNodeLoops
	noEnv         bool
	envWarnings   []string      // unknown NUMAPOOL_* variables (settings.Unknown)
	display       bool          // NUMAPOOL_DISPLAY_AFFINITY
	specEnv       bool          // spec came from NUMAPOOL_TOPOLOGY
	nodesEnv      string        // NUMAPOOL_NODES, when nodes came from it
	workersEnv    string        // NUMAPOOL_NUM_WORKERS, when workers came from it
	blockTime     time.Duration // how long an idle searcher looks before it sleeps; < 0: never sleeps
	blockTimeSet  bool
	watch         time.Duration        // the machine monitor's interval; 0: off (internal/place/monitor.go)
	watchSet      bool                 // watch came from WithMachineWatch
	machine       func() place.Reading // reads the process's CPUs instead of the reference thread (tests)
	spares        int                  // live spare threads per node (WithSpares); 0: defaultSpares; < 0: none
	sparesSet     bool
	blockEvery    time.Duration // WithBlockWatch; 0: defaultBlockWatch; < 0: off
	blockEverySet bool
	noStuckWarn   bool          // WithStuckWarning(false)
	stuckAfter    time.Duration // tests: a shorter stuckAfter
	stuckOut      io.Writer     // tests: where the warning goes instead of stderr
}

// stuckWarning reports whether a stuck pool writes its warning (stuck.go).
func (c *config) stuckWarning() bool { return !c.noStuckWarn }

func (c *config) stuckFor() time.Duration {
	if c.stuckAfter > 0 {
		return c.stuckAfter
	}
	return stuckAfter
}

func (c *config) stuckTo() io.Writer {
	if c.stuckOut != nil {
		return c.stuckOut
	}
	return os.Stderr
}

// WithStuckWarning turns the warning a stuck pool writes to stderr on
// (the default) or off: when every worker of a node has been blocked in a
// task for seconds with work queued for the node, the pool writes one
// line saying which workers, for how long and in which functions. Stats
// and Explain show it either way.
func WithStuckWarning(on bool) Option {
	return optionFunc(func(c *config) error {
		c.noStuckWarn = !on
		return nil
	})
}

// sparesCap is the cap on a node's live spare threads (spare.go).
func (c *config) sparesCap() int { return setOrDefault(c.spares, defaultSpares) }

// A setting whose 0 means off (WithSpares, WithBlockWatch and their
// NUMAPOOL_* forms) is kept as -1 when set to 0, so that the field's zero
// value means unset, the default: zeroIsOff on the way in, setOrDefault
// on the way out.
func zeroIsOff[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// setOrDefault is the value of a setting kept by zeroIsOff: 0 when off,
// def when unset.
func setOrDefault[T ~int | ~int64](v, def T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// WithSpares caps the spare threads each node keeps alive for tasks that
// block (Worker.Block; default 256, as Java's common pool caps its spares;
// a spare costs an OS thread while it lives, and one parked for 10 s
// ends). 0 starts none: Block then
// runs its function on the task's thread, with no spare, and counts it
// (SparesRefused). NUMAPOOL_SPARES sets it from the environment.
func WithSpares(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 0 {
			return fmt.Errorf("pool: WithSpares(%d): want 0 (none) or a positive cap", n)
		}
		c.spares, c.sparesSet = zeroIsOff(n), true
		return nil
	})
}

// DefaultBlockTime is how long an idle worker keeps looking for work
// before it sleeps (OpenMP's KMP_BLOCKTIME defaults to 200 ms: a pool
// serves shorter bursts between other work, so it spins less).
const DefaultBlockTime = 50 * time.Microsecond

// WithBlockTime sets the wait policy: how long an idle worker keeps
// looking for work before it sleeps (default DefaultBlockTime). 0 sleeps
// at once. A negative d never sleeps, OpenMP's active policy: a hand-off
// is picked up within a microsecond or so, and an idle pool keeps up to
// half its workers' CPUs busy (a spinning worker still yields its
// processor to goroutines that wait for one). A sleeping worker costs no
// CPU, and waking it costs a thread wake-up (tens of microseconds).
// NUMAPOOL_WAIT_POLICY and NUMAPOOL_BLOCKTIME set it from the
// environment.
func WithBlockTime(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		c.blockTime, c.blockTimeSet = max(d, -1), true
		return nil
	})
}

// spinFor is how long an idle searcher looks before it sleeps; < 0: it
// never sleeps while the pool runs.
func (c *config) spinFor() time.Duration {
	if c.blockTimeSet {
		return c.blockTime
	}
	return DefaultBlockTime
}

// WithMachineWatch sets how often the pool looks at the process's CPUs
// (its affinity mask, cgroup cpuset, online CPUs) and GOMAXPROCS, to
// re-plan its workers when they change (see "When the machine changes"
// in the package doc); default 1s. 0 turns the looks
// off: the pool then keeps the plan New made, as for a perf stat run
// that must count nothing else. The process's pools share one monitor,
// which looks as often as the shortest interval among them asks.
// NUMAPOOL_MACHINE_WATCH sets it from the environment.
func WithMachineWatch(interval time.Duration) Option {
	return optionFunc(func(c *config) error {
		if interval < 0 {
			return fmt.Errorf("pool: WithMachineWatch(%v): want 0 (off) or a positive interval", interval)
		}
		c.watch, c.watchSet = interval, true
		return nil
	})
}

// WithBlockWatch sets how often the block watch looks for workers whose
// tasks block without Worker.Block (by default defaultBlockWatch), or
// turns it off with 0. Where the pool has workers in reserve (placed by
// WithMaxWorkers beyond those running, or retired by a Resize), a node
// with blocked workers, work queued and none of its workers parked brings back
// enough of them to keep its share of workers busy; they retire once
// fewer are blocked ("Tasks that block" in the package doc). A pool with
// none in reserve has its watch at rest. Linux only: elsewhere there is
// no watch. NUMAPOOL_BLOCK_WATCH sets it from the environment.
func WithBlockWatch(interval time.Duration) Option {
	return optionFunc(func(c *config) error {
		if interval < 0 {
			return fmt.Errorf("pool: WithBlockWatch(%v): want 0 (off) or a positive interval", interval)
		}
		c.blockEvery, c.blockEverySet = zeroIsOff(interval), true
		return nil
	})
}

// defaultBlockWatch is the block watch's interval (standin.go) unless
// WithBlockWatch sets one: short against the waits a stand-in pays for
// (one costs a thread start and a bind), long enough that a look, a
// system call per awake worker, takes a small share of a CPU.
const defaultBlockWatch = time.Millisecond

// blockWatchEvery is the block watch's interval; 0: off.
func (c *config) blockWatchEvery() time.Duration {
	return setOrDefault(c.blockEvery, defaultBlockWatch)
}

// WithWorkers sets the number of workers (default: min(allowed CPUs,
// GOMAXPROCS), or one per CPU of a synthetic topology). Each worker of a
// binding that locks a thread holds a thread of its own: New returns an
// error wrapping ErrTooManyWorkers when the process may not start that
// many threads (internal/place/limits.go).
func WithWorkers(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("pool: WithWorkers(%d): need at least one worker", n)
		}
		c.workers, c.workersSet = n, true
		return nil
	})
}

// WithMaxWorkers places m workers, of which New starts WithWorkers'
// count (without WithWorkers, the default count, at most m): with
// WithMaxWorkers(8) and WithWorkers(2) the pool can grow from 2 workers
// to 8. Resize starts the others (see Resizing), and they stand in for
// workers whose tasks block (WithBlockWatch). The m workers are spread
// over the nodes and CPUs as WithWorkers(m) would spread them; those
// beyond the CPUs share them, which Explain reports as degraded only
// for the workers that start (the others take no CPU until they run).
// The pool claims their CPUs, and the thread limits New checks count all
// m.
func WithMaxWorkers(m int) Option {
	return optionFunc(func(c *config) error {
		if m < 1 {
			return fmt.Errorf("pool: WithMaxWorkers(%d): need at least one worker", m)
		}
		c.maxWorkers, c.maxWorkersSet = m, true
		return nil
	})
}

// WithBinding sets how workers are bound (default pin.NUMADomains).
// pin.Goroutines binds nothing and locks no worker to a thread: a task
// may then change threads mid-way, and hand-offs with other goroutines
// cost no thread switch.
func WithBinding(b pin.Binding) Option {
	return optionFunc(func(c *config) error {
		if !b.Valid() {
			return fmt.Errorf("pool: WithBinding(%v): unknown binding", b)
		}
		c.binding, c.bindingSet = b, true
		return nil
	})
}

// WithSteal sets the victim order (default steal.Hierarchical).
func WithSteal(m steal.Mode) Option {
	return optionFunc(func(c *config) error {
		if m != steal.Hierarchical && m != steal.Flat {
			return fmt.Errorf("pool: WithSteal(%v): unknown mode", m)
		}
		c.mode, c.modeSet = m, true
		return nil
	})
}

// WithTopology uses t instead of discovering this machine.
func WithTopology(t *topology.Topology) Option {
	return optionFunc(func(c *config) error {
		if t == nil {
			return fmt.Errorf("pool: WithTopology(nil)")
		}
		c.topo = t
		return nil
	})
}

// WithSpec builds a synthetic topology (topology.Synthetic) on the
// discovered one: "2x4", "2x4x2" or "0-1;2-3".
func WithSpec(spec string) Option {
	return optionFunc(func(c *config) error {
		if spec == "" {
			return fmt.Errorf("pool: WithSpec(\"\"): empty spec")
		}
		c.spec = spec
		return nil
	})
}

// WithNodes restricts the pool to the given NUMA nodes (OS node IDs).
func WithNodes(ids ...int) Option {
	return optionFunc(func(c *config) error {
		if len(ids) == 0 {
			return fmt.Errorf("pool: WithNodes(): no node given")
		}
		c.nodes, c.nodesSet = ids, true
		return nil
	})
}

// WithRequiredPlacement makes New fail when the placement asked for
// cannot be honoured instead of degrading and recording why in Explain:
// on every degradation Explain would report (pinning refused, a node
// asked for that has no CPU, more starting workers than a node's CPUs, a
// synthetic topology on fewer CPUs than it names), and on a NUMAPOOL_*
// variable the pool does not know, which may be a misspelled setting.
func WithRequiredPlacement() Option {
	return optionFunc(func(c *config) error { c.required = true; return nil })
}

// WithPanicHandler receives the panics of tasks given to Submit and
// Spawn (on the pool or a Node), with the stack of the panicking task. Without a
// handler such a panic crashes the process, as an unrecovered panic in a
// goroutine does.
func WithPanicHandler(h func(value any, stack []byte)) Option {
	return optionFunc(func(c *config) error { c.panicHandler = h; return nil })
}

// WithShardBound bounds each node's queue of submitted, not yet started
// tasks: TrySubmit then reports ErrFull and Submit waits for room. The
// bound is back-pressure on producers outside the pool: a Submit (or
// Async, Group.Go, ParallelFor) from one of the pool's own tasks never
// waits for room, since only the workers make it.
func WithShardBound(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("pool: WithShardBound(%d): need a positive bound", n)
		}
		c.shardBound = n
		return nil
	})
}

// WithFairnessInterval fixes how many tasks a worker runs between looks
// at its node's shard (default: self-tuned to about 200µs of work, as
// Tokio, starting at 61 and kept within 2..127).
func WithFairnessInterval(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > 1<<20 {
			return fmt.Errorf("pool: WithFairnessInterval(%d): want 1..%d", n, 1<<20)
		}
		c.interval = n
		return nil
	})
}

// WithCrossNodeLoops lets a node that has run dry help a lagging one
// with its ParallelFor and MapReduce pieces: once a piece has waited
// crossNodeAfter, a worker of another node takes a grain-sized bite from
// its end and sends the rest home. It trades locality for balance: the
// bites process memory of another node. By default every piece stays on
// the node whose block it belongs to, its home, as OpenMP's static
// schedule with proc_bind does, so data first touched by a loop is
// always processed on its node, and a node that finishes early waits.
func WithCrossNodeLoops() Option {
	return optionFunc(func(c *config) error { c.crossLoops = true; return nil })
}

// WithoutEnv ignores the NUMAPOOL_* environment variables.
func WithoutEnv() Option {
	return optionFunc(func(c *config) error { c.noEnv = true; return nil })
}

// The environment variables, in OpenMP's vocabulary, give defaults that
// explicit options override (the package doc lists them).
const (
	envNumWorkers = "NUMAPOOL_NUM_WORKERS" // a positive count
	envMaxWorkers = "NUMAPOOL_MAX_WORKERS" // a positive count: the workers placed (WithMaxWorkers)
	envPlaces     = "NUMAPOOL_PLACES"      // threads, cores, ll_caches, numa_domains or none (placesWanted)
	envSteal      = "NUMAPOOL_STEAL"       // hierarchical or flat
	envTopology   = "NUMAPOOL_TOPOLOGY"    // a synthetic spec: 2x4, 2x4x2, 0-1;2-3
	envNodes      = "NUMAPOOL_NODES"       // a list of node IDs: 0,2 or 0-1
	envWaitPolicy = "NUMAPOOL_WAIT_POLICY" // passive or active
	envBlockTime  = "NUMAPOOL_BLOCKTIME"   // 200us, 1ms, a number of ms, or infinite
	envSpares     = "NUMAPOOL_SPARES"      // spare threads per node for Worker.Block: 0 or a positive cap
)

// placesWanted lists the bindings NUMAPOOL_PLACES takes: all but
// pin.Goroutines, which only the program may choose.
const placesWanted = "threads, cores, ll_caches, numa_domains or none, optionally followed by :performance or :efficiency"

// applyEnv fills what no option set from the environment; lookup is
// os.LookupEnv outside tests.
func (c *config) applyEnv(lookup func(string) (string, bool)) error {
	if c.noEnv {
		return nil
	}
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		return strings.TrimSpace(v), ok && strings.TrimSpace(v) != ""
	}
	if v, ok := get(envNumWorkers); ok && !c.workersSet {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("pool: %s=%q: want a positive number of workers", envNumWorkers, v)
		}
		c.workers, c.workersEnv = n, v
	}
	if v, ok := get(envMaxWorkers); ok && !c.maxWorkersSet {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("pool: %s=%q: want a positive number of workers", envMaxWorkers, v)
		}
		c.maxWorkers, c.maxWorkersEnv = n, v
	}
	if v, ok := get(envPlaces); ok {
		if err := c.placesEnv(v); err != nil {
			return err
		}
	}
	if v, ok := get(envSteal); ok && !c.modeSet {
		m, err := steal.ParseMode(v)
		if err != nil {
			return fmt.Errorf("pool: %s=%q: %w", envSteal, v, err)
		}
		c.mode = m
	}
	if v, ok := get(envTopology); ok && c.spec == "" && c.topo == nil {
		c.spec, c.specEnv = v, true
	}
	if v, ok := get(envNodes); ok && !c.nodesSet {
		set, err := topology.ParseCPUList([]byte(v))
		if err != nil || set.IsEmpty() {
			return fmt.Errorf("pool: %s=%q: want a list of node IDs such as 0,2 or 0-1", envNodes, v)
		}
		c.nodes, c.nodesEnv = set.List(), v
	}
	if v, ok := get(envDisplayAffinity); ok {
		on, err := settings.ParseBool(v)
		if err != nil {
			return fmt.Errorf("pool: %s=%q: %w", envDisplayAffinity, v, err)
		}
		c.display = on
	}
	if v, ok := get(envSpares); ok && !c.sparesSet {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("pool: %s=%q: want 0 (none) or a positive cap of spare threads per node", envSpares, v)
		}
		c.spares = zeroIsOff(n)
	}
	if c.blockTimeSet {
		return nil // WithBlockTime sets the wait policy
	}
	// OpenMP's reading: an active policy spins without limit unless a
	// block time bounds it; a passive one spins for the block time.
	if v, ok := get(envWaitPolicy); ok {
		active, err := settings.ParseWaitPolicy(v)
		if err != nil {
			return fmt.Errorf("pool: %s=%q: %w", envWaitPolicy, v, err)
		}
		if active {
			c.blockTime, c.blockTimeSet = -1, true
		}
	}
	if v, ok := get(envBlockTime); ok {
		d, err := settings.ParseBlockTime(v)
		if err != nil {
			return fmt.Errorf("pool: %s=%q: %w", envBlockTime, v, err)
		}
		c.blockTime, c.blockTimeSet = d, true
	}
	return nil
}

func newConfig(opts []Option, lookup func(string) (string, bool)) (config, error) {
	c := config{binding: pin.NUMADomains, mode: steal.Hierarchical, watch: place.DefaultWatch}
	for _, o := range opts {
		if o == nil {
			return c, fmt.Errorf("pool: nil Option")
		}
		if err := o.apply(&c); err != nil {
			return c, err
		}
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := c.applyEnv(lookup); err != nil {
		return c, err
	}
	if err := c.applyWatchEnv(lookup); err != nil {
		return c, err
	}
	if !c.noEnv {
		c.envWarnings = settings.Unknown(environ(), settingNames)
		if c.required && len(c.envWarnings) > 0 {
			return c, fmt.Errorf("pool: WithRequiredPlacement: %s", strings.Join(c.envWarnings, "; "))
		}
	}
	return c, nil
}

// placesEnv applies NUMAPOOL_PLACES: a binding, optionally followed by
// ":" and a CPU kind (cores:performance, as libomp's cores:intel_core),
// each part only where no option set it.
func (c *config) placesEnv(v string) error {
	places, kind, hasKind := strings.Cut(v, ":")
	if hasKind && !c.kindSet {
		k, err := place.ParseKind(kind)
		if err != nil {
			return fmt.Errorf("pool: %s=%q: %w", envPlaces, v, err)
		}
		c.kind, c.kindEnv = k, v
	}
	if c.bindingSet {
		return nil
	}
	b, err := pin.ParseBinding(places)
	if err == nil && !b.LocksThread() {
		// The environment tunes a program; it must not take away the
		// thread-locked tasks the program may rely on.
		return fmt.Errorf("pool: %s=%q: workers locked to no thread are the program's choice (pool.WithBinding(pin.Goroutines)), not the environment's; unset it or give %s", envPlaces, v, placesWanted)
	}
	if err != nil {
		return fmt.Errorf("pool: %s=%q: unknown binding (want %s)", envPlaces, v, placesWanted)
	}
	c.binding = b
	return nil
}

// planRequest is what New asks of the plan, inside the process's CPUs
// now (cpus); monitorThread says New is to start the machine monitor.
func (c config) planRequest(cpus topology.CPUSet, monitorThread bool) place.Request {
	r := place.Request{Topo: c.topo, Spec: c.spec, Nodes: c.nodes, Kind: c.kind, Workers: c.workers, Max: c.maxWorkers,
		Binding: c.binding, Required: c.required, CPUs: cpus, MonitorThread: monitorThread}
	if c.specEnv {
		r.SpecFrom = fmt.Sprintf("%s=%q: ", envTopology, c.spec)
	}
	if c.nodesEnv != "" {
		r.NodesFrom = fmt.Sprintf("%s=%q: ", envNodes, c.nodesEnv)
	}
	if c.kindEnv != "" {
		r.KindFrom = fmt.Sprintf("%s=%q: ", envPlaces, c.kindEnv)
	}
	if c.workersEnv != "" {
		r.WorkersFrom = fmt.Sprintf("%s=%s: ", envNumWorkers, c.workersEnv)
	}
	r.MaxFrom = fmt.Sprintf("WithMaxWorkers(%d)", c.maxWorkers)
	if c.maxWorkersEnv != "" {
		r.MaxFrom = fmt.Sprintf("%s=%s", envMaxWorkers, c.maxWorkersEnv)
	}
	return r
}

// The environment's settings beyond the options: a NUMAPOOL_* variable
// the pool does not know is a warning (settings.Unknown), and
// NUMAPOOL_DISPLAY_AFFINITY prints where the workers are when a pool
// starts (OpenMP's OMP_DISPLAY_AFFINITY).

// envDisplayAffinity is true or false (case-insensitive; also 1 or 0).
const envDisplayAffinity = "NUMAPOOL_DISPLAY_AFFINITY"

// settingNames are the NUMAPOOL_* variables the pool reads.
var settingNames = []string{envNumWorkers, envMaxWorkers, envPlaces, envSteal, envTopology, envNodes,
	envWaitPolicy, envBlockTime, envSpares, envDisplayAffinity, envMachineWatch, envBlockWatch}

// envBlockWatch is the block watch's interval (WithBlockWatch): a
// duration, a number of ms, or 0 for off (settings.ParseWatch).
const envBlockWatch = "NUMAPOOL_BLOCK_WATCH"

// envMachineWatch is the machine monitor's interval (WithMachineWatch):
// a duration, a number of ms, or 0 for off (settings.ParseWatch).
const envMachineWatch = "NUMAPOOL_MACHINE_WATCH"

// applyWatchEnv sets the machine monitor's interval from
// NUMAPOOL_MACHINE_WATCH and the block watch's from NUMAPOOL_BLOCK_WATCH,
// each unless its option set it.
func (c *config) applyWatchEnv(lookup func(string) (string, bool)) error {
	if d, ok, err := c.envInterval(lookup, envMachineWatch, c.watchSet); err != nil {
		return err
	} else if ok {
		c.watch = d
	}
	if d, ok, err := c.envInterval(lookup, envBlockWatch, c.blockEverySet); err != nil {
		return err
	} else if ok {
		c.blockEvery = zeroIsOff(d)
	}
	return nil
}

// envInterval reads the interval setting name (a duration, a number of
// ms, or 0 for off); false where it is unset, ignored, or set already by
// an option.
func (c *config) envInterval(lookup func(string) (string, bool), name string, set bool) (time.Duration, bool, error) {
	v, ok := lookup(name)
	v = strings.TrimSpace(v)
	if c.noEnv || set || !ok || v == "" {
		return 0, false, nil
	}
	d, err := settings.ParseWatch(v)
	if err != nil {
		return 0, false, fmt.Errorf("pool: %s=%q: %w", name, v, err)
	}
	return d, true, nil
}

// environ lists the environment as os.Environ does: a variable so that
// tests can give another.
var environ = os.Environ

// stderr is where the pool prints its warnings and the affinity display:
// a variable so that tests can read them.
var stderr io.Writer = os.Stderr
