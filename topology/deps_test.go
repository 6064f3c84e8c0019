package topology

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryDeps checks that importing the library does not bring in
// gopsutil and the modules it needs: only the CLI shows what gopsutil
// knows (cmd/numapool/machine.go). It asks go list for the dependencies
// of pool and topology on each platform the CI builds for.
func TestLibraryDeps(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	const forbidden = "github.com/shirou/gopsutil"
	for _, goos := range []string{"linux", "darwin", "windows"} {
		cmd := exec.Command(goCmd, "list", "-deps",
			"github.com/numapool/numapool/pool",
			"github.com/numapool/numapool/topology")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("GOOS=%s go list -deps: %v\n%s", goos, err, out)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			if strings.HasPrefix(dep, forbidden) {
				t.Errorf("GOOS=%s: pool or topology depends on %s", goos, dep)
			}
		}
	}
}
