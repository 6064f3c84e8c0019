package pool

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The environment's settings beyond the options: a NUMAPOOL_* variable
// the pool does not know is a warning (settings.Unknown), and
// NUMAPOOL_DISPLAY_AFFINITY prints where the workers are when a pool
// starts (OpenMP's OMP_DISPLAY_AFFINITY).

// envDisplayAffinity is true or false (case-insensitive; also 1 or 0).
const envDisplayAffinity = "NUMAPOOL_DISPLAY_AFFINITY"

// settingNames are the NUMAPOOL_* variables the pool reads.
var settingNames = []string{envNumWorkers, envPlaces, envSteal, envTopology, envNodes,
	envWaitPolicy, envBlockTime, envDisplayAffinity, envMachineWatch}

// envMachineWatch is the machine monitor's interval (WithMachineWatch):
// a time.ParseDuration duration, or 0 for off.
const envMachineWatch = "NUMAPOOL_MACHINE_WATCH"

// applyWatchEnv sets the monitor's interval from NUMAPOOL_MACHINE_WATCH
// unless WithMachineWatch set it.
func (c *config) applyWatchEnv(lookup func(string) (string, bool)) error {
	v, ok := lookup(envMachineWatch)
	v = strings.TrimSpace(v)
	if c.noEnv || c.watchSet || !ok || v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return fmt.Errorf("pool: %s=%q: want a duration such as 1s or 200ms, or 0 for off", envMachineWatch, v)
	}
	c.watch = d
	return nil
}

// environ lists the environment as os.Environ does: a variable so that
// tests can give another.
var environ = os.Environ

// stderr is where the pool prints its warnings and the affinity display:
// a variable so that tests can read them.
var stderr io.Writer = os.Stderr
