//go:build gc && !purego

package pin

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// The register is trusted only where it agrees with getcpu in every round
// that stayed on one CPU, with enough such rounds.
func TestAuxAgrees(t *testing.T) {
	cpu1node0 := [2]int{1, 0}
	for _, c := range []struct {
		name  string
		round func(i int) (before, after [2]int, aux uint32, err error)
		want  bool
	}{
		{"agrees", func(int) ([2]int, [2]int, uint32, error) { return cpu1node0, cpu1node0, 1, nil }, true},
		{"node in the high bits", func(int) ([2]int, [2]int, uint32, error) {
			return [2]int{5, 3}, [2]int{5, 3}, 3<<auxCPUBits | 5, nil
		}, true},
		{"moved in some rounds", func(i int) ([2]int, [2]int, uint32, error) {
			if i%2 == 0 {
				return [2]int{0, 0}, cpu1node0, 0, nil
			}
			return cpu1node0, cpu1node0, 1, nil
		}, true},
		{"a register not kept per CPU", func(int) ([2]int, [2]int, uint32, error) { return cpu1node0, cpu1node0, 0, nil }, false},
		{"wrong once", func(i int) ([2]int, [2]int, uint32, error) {
			if i == auxProbeRounds-1 {
				return cpu1node0, cpu1node0, 2, nil
			}
			return cpu1node0, cpu1node0, 1, nil
		}, false},
		{"always moving", func(int) ([2]int, [2]int, uint32, error) { return [2]int{0, 0}, cpu1node0, 1, nil }, false},
		{"getcpu fails", func(int) ([2]int, [2]int, uint32, error) { return cpu1node0, cpu1node0, 1, errors.New("ENOSYS") }, false},
	} {
		i := 0
		got := auxAgrees(func() (before, after [2]int, aux uint32, err error) {
			defer func() { i++ }()
			return c.round(i)
		})
		if got != c.want {
			t.Errorf("%s: trusted %v, want %v", c.name, got, c.want)
		}
	}
}

// The probe reads the register on threads as they are: it sets no
// thread's mask, so none is left without a CPU that was offline while it
// ran (a mask read then and put back would leave that CPU out).
func TestAuxTrustedSetsNoMask(t *testing.T) {
	before := taskMasks(t)
	_ = auxTrusted()
	after := taskMasks(t)
	for tid, m := range before {
		if a, ok := after[tid]; ok && a != m {
			t.Errorf("thread %s: mask %s before the probe, %s after", tid, m, a)
		}
	}
}

// taskMasks returns each thread's Cpus_allowed_list by its ID.
func taskMasks(t *testing.T) map[string]string {
	t.Helper()
	dirs, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip(err)
	}
	masks := map[string]string{}
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				masks[d.Name()] = strings.TrimSpace(v)
			}
		}
	}
	return masks
}
