package pool

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestApportion(t *testing.T) {
	real := newTestPool(t, WithSpec("0;1")) // two single-CPU nodes
	defer real.Close()
	p := newTestPool(t, WithSpec("1x4"), WithWorkers(2))
	defer p.Close()
	if p.Workers() != 2 {
		t.Errorf("%d workers", p.Workers())
	}
}

// WithRequiredPlacement fails New on every degradation Explain reports.
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
