package pool

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/numapool/numapool/pin"
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
