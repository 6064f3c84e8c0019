package place

import (
	"runtime"
	"testing"

	"github.com/numapool/numapool/topology"
)

// A look reads the same sets from its open files as a reading from
// scratch does.
func TestMachineReaderReadsWhatTopologyReads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := NewReader()
	defer r.Close()
	for range 3 {
		got, want := r.Read().PC, topology.ReadProcessCPUsOf(0)
		if !got.Mask.Equal(want.Mask) || !got.Online.Equal(want.Online) || !got.Cgroup.Equal(want.Cgroup) || got.CgroupFile != want.CgroupFile {
			t.Fatalf("a look read %+v, a fresh reading %+v", got, want)
		}
		if got.Online.IsEmpty() {
			t.Fatal("a look read no online CPU")
		}
	}
}
