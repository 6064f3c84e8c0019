package pool

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/settings"
	"github.com/numapool/numapool/steal"
)

func TestOptionsWinOverEnvironment(t *testing.T) {
	p, err := newPool([]Option{WithWorkers(2), WithBinding(pin.None), WithSteal(steal.Hierarchical), WithSpec("2x1")},
		env(map[string]string{envNumWorkers: "5", envPlaces: "threads", envSteal: "flat", envTopology: "4x1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Workers() != 2 || p.cfg.binding != pin.None || p.cfg.mode != steal.Hierarchical || len(p.Nodes()) != 2 {
		t.Errorf("workers %d binding %v mode %v nodes %v", p.Workers(), p.cfg.binding, p.cfg.mode, p.Nodes())
	}
}

func TestNodesRestriction(t *testing.T) {
	p, err := newPool([]Option{WithSpec("4x1")}, env(map[string]string{envNodes: "1,3"}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Nodes(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("nodes %v, want [1 3]", got)
	}
}

func TestBadConfigurationNamesTheValue(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		env  map[string]string
		want string
	}{
		{nil, map[string]string{envNumWorkers: "zero"}, envNumWorkers},
		{nil, map[string]string{envNumWorkers: "-2"}, "-2"},
		{nil, map[string]string{envPlaces: "sockets"}, `"sockets": unknown binding (want threads, cores, ll_caches, numa_domains or none, optionally followed by :performance or :efficiency)`},
		{nil, map[string]string{envPlaces: "cores:fast"}, envPlaces + `="cores:fast": unknown CPU kind "fast" (want performance or efficiency)`},
		{nil, map[string]string{envPlaces: "sockets:performance"}, `"sockets:performance": unknown binding`},
		{nil, map[string]string{envSteal: "random"}, "random"},
		{nil, map[string]string{envTopology: "2x"}, envTopology + `="2x"`},
		{nil, map[string]string{envTopology: "2x1", envNodes: "7"}, envNodes + `="7"`},
		{nil, map[string]string{envNodes: "a"}, envNodes},
		{[]Option{WithWorkers(0)}, nil, "WithWorkers(0)"},
		{[]Option{WithShardBound(-1)}, nil, "WithShardBound(-1)"},
		{[]Option{WithFairnessInterval(0)}, nil, "WithFairnessInterval(0)"},
		{[]Option{WithSpec("2x1"), WithNodes(7)}, nil, "7"},
		{[]Option{WithSpec("2x1"), WithNodes(0, 7), WithRequiredPlacement()}, nil, "node 7"},
		{[]Option{WithSpec("4x1"), WithWorkers(2), WithRequiredPlacement()}, nil, "2 workers"},
		{[]Option{nil}, nil, "nil Option"},
		{nil, map[string]string{envWaitPolicy: "spin"}, "spin"},
		{nil, map[string]string{envBlockTime: "fast"}, envBlockTime},
		{nil, map[string]string{envBlockTime: "-5ms"}, "-5ms"},
		{[]Option{WithBinding(pin.Goroutines + 1)}, nil, "WithBinding(Binding(6))"},
		{nil, map[string]string{envPlaces: "goroutines"}, envPlaces + `="goroutines": workers locked to no thread are the program's choice (pool.WithBinding(pin.Goroutines)), not the environment's; unset it or give threads`},
	} {
		p, err := newPool(tc.opts, env(tc.env))
		if err == nil {
			p.Close()
			t.Errorf("%v %v: accepted", tc.opts, tc.env)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not name %q", err, tc.want)
		}
	}
}

// The wait policy and block time: OpenMP's spellings in the environment,
// WithBlockTime over the environment, and an active policy's unlimited
// spin unless a block time bounds it.
func TestWaitPolicySettings(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		env  map[string]string
		spin time.Duration
	}{
		{nil, nil, DefaultBlockTime},
		{nil, map[string]string{envWaitPolicy: "ACTIVE"}, -1},
		{nil, map[string]string{envWaitPolicy: "passive"}, DefaultBlockTime},
		{nil, map[string]string{envWaitPolicy: "active", envBlockTime: "200us"}, 200 * time.Microsecond},
		{nil, map[string]string{envBlockTime: "0"}, 0},
		{nil, map[string]string{envBlockTime: "3"}, 3 * time.Millisecond},
		{nil, map[string]string{envBlockTime: "infinite"}, -1},
		{[]Option{WithBlockTime(time.Millisecond)},
			map[string]string{envWaitPolicy: "active", envBlockTime: "infinite"}, time.Millisecond},
		{[]Option{WithBlockTime(-time.Hour)}, nil, -1},
	} {
		c, err := newConfig(tc.opts, env(tc.env))
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if c.spinFor() != tc.spin {
			t.Errorf("%d options, env %v: spin %v; want %v", len(tc.opts), tc.env, c.spinFor(), tc.spin)
		}
	}
}

// A spec that is no spec says what a spec looks like.
func TestSpecErrorShowsTheForms(t *testing.T) {
	for _, spec := range []string{"2", "2x", "twoxfour", "2x0"} {
		_, err := newPool(nil, env(map[string]string{envTopology: spec}))
		if err == nil || !strings.Contains(err.Error(), "a spec is nodes x CPUs such as 2x4") || !strings.Contains(err.Error(), envTopology) {
			t.Errorf("NUMAPOOL_TOPOLOGY=%q: %v, want an error that names the variable and shows the forms", spec, err)
		}
	}
}

func TestRequiredPlacementFailsOnEveryDegradation(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"more workers than CPUs", []Option{WithWorkers(2*cpus + 1)}},
		{"a node without CPUs", []Option{WithSpec("2x1"), WithNodes(0, 7)}},
		{"a synthetic topology on fewer CPUs", []Option{WithSpec(fmt.Sprintf("2x%d", cpus))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPool(tc.opts, env(nil))
			if err != nil {
				t.Fatalf("without WithRequiredPlacement: %v", err)
			}
			ex := p.Explain()
			_ = p.Close()
			if strings.Contains(ex, "degraded: nothing") {
				t.Skipf("nothing degraded here:\n%s", ex)
			}
			_, err = newPool(append(tc.opts, WithRequiredPlacement()), env(nil))
			if err == nil || !strings.Contains(err.Error(), "WithRequiredPlacement") {
				t.Errorf("with WithRequiredPlacement: %v, want New to fail (Explain said:\n%s)", err, ex)
			}
		})
	}
}

// Without WithStrict, a node that cannot be had is recorded, not fatal.
func TestDegradationIsVisible(t *testing.T) {
	p := newTestPool(t, WithSpec("2x1"), WithNodes(0, 9))
	defer p.Close()
	if ex := p.Explain(); !strings.Contains(ex, "node 9") {
		t.Errorf("Explain does not say node 9 was dropped:\n%s", ex)
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	p, err := newPool(nil, env(map[string]string{
		envNumWorkers: "3", envPlaces: "cores", envSteal: "flat", envTopology: "2x2",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Workers() != 3 || p.cfg.binding != pin.Cores || p.cfg.mode != steal.Flat || len(p.Nodes()) != 2 {
		t.Errorf("workers %d binding %v mode %v nodes %v", p.Workers(), p.cfg.binding, p.cfg.mode, p.Nodes())
	}
}

// NUMAPOOL_MAX_WORKERS places more workers than start, as WithMaxWorkers
// does, which overrides it; a refusal names the variable.
func TestMaxWorkersSetting(t *testing.T) {
	p, err := newPool(nil, env(map[string]string{envTopology: "2x2", envNumWorkers: "2", envMaxWorkers: "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Workers() != 8 || p.Size() != 2 {
		t.Errorf("%s=8, %s=2: Workers %d, Size %d", envMaxWorkers, envNumWorkers, p.Workers(), p.Size())
	}
	_ = p.Close()
	p, err = newPool([]Option{WithMaxWorkers(6)}, env(map[string]string{envTopology: "2x2", envNumWorkers: "2", envMaxWorkers: "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Workers() != 6 {
		t.Errorf("WithMaxWorkers(6) over %s=8: Workers %d", envMaxWorkers, p.Workers())
	}
	_ = p.Close()
	for v, want := range map[string]string{"0": `NUMAPOOL_MAX_WORKERS="0"`, "x": `NUMAPOOL_MAX_WORKERS="x"`, "1": "above NUMAPOOL_MAX_WORKERS=1"} {
		if _, err := newPool(nil, env(map[string]string{envTopology: "2x2", envNumWorkers: "2", envMaxWorkers: v})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v, want an error with %q", envMaxWorkers, v, err, want)
		}
	}
}

// Values are case-insensitive, as OpenMP's are.
func TestSettingsAreCaseInsensitive(t *testing.T) {
	c, err := newConfig(nil, env(map[string]string{
		envPlaces: "CORES", envSteal: "Flat", envWaitPolicy: "Active", envBlockTime: "INFINITE",
		envDisplayAffinity: "TRUE",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.binding != pin.Cores || c.mode != steal.Flat || c.spinFor() != -1 || !c.display {
		t.Errorf("binding %v, steal %v, spin %v, display %v; want cores, flat, -1, true", c.binding, c.mode, c.spinFor(), c.display)
	}
	p, err := newPool([]Option{WithWorkers(2)}, env(map[string]string{envTopology: "2X1"}))
	if err != nil {
		t.Fatalf("NUMAPOOL_TOPOLOGY=2X1: %v", err)
	}
	defer p.Close()
	if len(p.Nodes()) != 2 {
		t.Errorf("NUMAPOOL_TOPOLOGY=2X1: %d nodes, want 2", len(p.Nodes()))
	}
}

// An unknown NUMAPOOL_* variable is a warning naming the nearest setting,
// printed once, in Explain, and an error under WithRequiredPlacement; the
// harness's own variables are not warned about.
func TestUnknownSettingIsNamed(t *testing.T) {
	defer func(e func() []string, w io.Writer) { environ, stderr = e, w }(environ, stderr)
	environ = func() []string {
		return []string{"NUMAPOOL_WORKERS=4", "NUMAPOOL_TEST_SOMETHING=1", "NUMAPOOL_VM_NODES=2", "HOME=/root"}
	}
	var out strings.Builder
	stderr = &out
	settings.Forget()
	want := "NUMAPOOL_WORKERS is not a numapool setting (did you mean NUMAPOOL_NUM_WORKERS?)"
	for range 2 {
		p, err := newPool([]Option{WithWorkers(1)}, env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if ex := p.Explain(); !strings.Contains(ex, "environment: "+want) {
			t.Errorf("Explain does not say %q:\n%s", want, ex)
		}
		_ = p.Close()
	}
	if got := out.String(); got != "numapool: warning: "+want+"\n" {
		t.Errorf("stderr = %q, want the warning once", got)
	}
	if _, err := newPool([]Option{WithWorkers(1), WithRequiredPlacement()}, env(nil)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("WithRequiredPlacement: %v, want an error saying %q", err, want)
	}
	if _, err := newPool([]Option{WithWorkers(1), WithoutEnv()}, env(nil)); err != nil {
		t.Errorf("WithoutEnv: %v", err)
	}
}

// NUMAPOOL_DISPLAY_AFFINITY=true prints one line per worker when a pool
// starts: its node, worker ID, thread ID and bound CPUs.
func TestDisplayAffinity(t *testing.T) {
	defer func(w io.Writer) { stderr = w }(stderr)
	var out strings.Builder
	stderr = &out
	p, err := newPool([]Option{WithSpec("2x1")}, env(map[string]string{envDisplayAffinity: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != p.Workers() {
		t.Fatalf("%d lines for %d workers:\n%s", len(lines), p.Workers(), out.String())
	}
	for i, w := range p.workers {
		want := fmt.Sprintf("numapool: pid %d tid %d node %d worker %d cpu %d bound to ", os.Getpid(), w.th.TID(), w.domain.node.ID, w.id, w.cpu)
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("line %d = %q, want it to start %q", i, lines[i], want)
		}
		if runtime.GOOS == "linux" && w.th.TID() == 0 {
			t.Errorf("worker %d: no thread ID", w.id)
		}
	}
	out.Reset()
	q, err := newPool([]Option{WithWorkers(1)}, env(map[string]string{envDisplayAffinity: "false"}))
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Close()
	if out.Len() != 0 {
		t.Errorf("NUMAPOOL_DISPLAY_AFFINITY=false printed %q", out.String())
	}
	if _, err := newPool(nil, env(map[string]string{envDisplayAffinity: "maybe"})); err == nil || !strings.Contains(err.Error(), envDisplayAffinity) {
		t.Errorf("NUMAPOOL_DISPLAY_AFFINITY=maybe: %v, want an error naming it", err)
	}
}
