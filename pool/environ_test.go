package pool

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool/internal/settings"
	"github.com/numapool/numapool/steal"
)

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
