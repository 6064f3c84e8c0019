package topology

import (
	"runtime"
	"testing"
)

func TestProcessCPUsUsable(t *testing.T) {
	s := func(list string) CPUSet {
		if list == "" {
			return CPUSet{}
		}
		c, err := ParseCPUList([]byte(list))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct{ mask, cgroup, online, want string }{
		{"0-3", "", "", "0-3"},
		{"0-3", "2-3", "0-3", "2-3"},
		{"0-3", "0-7", "0-2", "0-2"},
		{"0-3", "4-7", "0-7", "0-3"}, // a cpuset that leaves nothing is not applied
		{"", "0-3", "0-3", ""},       // no mask: unknown
	} {
		pc := ProcessCPUs{Mask: s(tc.mask), Cgroup: s(tc.cgroup), Online: s(tc.online)}
		if got := pc.Usable(); !got.Equal(s(tc.want)) {
			t.Errorf("mask %q, cgroup %q, online %q: Usable %s, want %q", tc.mask, tc.cgroup, tc.online, got, tc.want)
		}
	}
}

// The process's CPUs read now, from the calling thread: the mask is that
// thread's.
func TestReadProcessCPUsOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread affinity is read on Linux only")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mask, err := ThreadAffinity(0)
	if err != nil {
		t.Fatal(err)
	}
	pc := ReadProcessCPUsOf(0)
	if pc.MaskErr != nil || !pc.Mask.Equal(mask) {
		t.Errorf("ReadProcessCPUsOf(0): mask %s (%v), want the thread's %s", pc.Mask, pc.MaskErr, mask)
	}
	if u := pc.Usable(); u.IsEmpty() || !u.AndNot(mask).IsEmpty() {
		t.Errorf("Usable %s: want a non-empty part of the mask %s", u, mask)
	}
}
