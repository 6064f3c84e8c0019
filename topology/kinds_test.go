package topology

import (
	"fmt"
	"testing"
	"testing/fstest"
)

// kindsFS is machineFS(8) with each CPU's kind files as kindFiles says;
// an empty value leaves the file out.
func kindsFS(kindFiles func(cpu int) (maxKHz, baseKHz, capacity string)) fstest.MapFS {
	f := machineFS(8)
	for c := range 8 {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/", c)
		maxKHz, baseKHz, capacity := kindFiles(c)
		for name, v := range map[string]string{"cpufreq/cpuinfo_max_freq": maxKHz, "cpufreq/base_frequency": baseKHz, "cpu_capacity": capacity} {
			if v != "" {
				f[dir+name] = &fstest.MapFile{Data: []byte(v + "\n")}
			}
		}
	}
	return f
}

// kindsOf describes the kinds as "rank:name:CPUs:capacity" for comparison.
func kindsOf(topo *Topology) []string {
	var out []string
	for _, k := range topo.Kinds {
		out = append(out, fmt.Sprintf("%d:%s:%s:%d", k.Rank, k.Name, k.CPUs, k.Capacity))
	}
	return out
}

func capacities(topo *Topology) []int {
	var out []int
	for _, c := range topo.CPUs {
		out = append(out, c.Capacity)
	}
	return out
}

func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      func(cpu int) (maxKHz, baseKHz, capacity string)
		kinds      []string
		capacities []int
		perf, eff  CPUSet // KindCPUs of the names, where given
	}{
		{
			name:       "no data",
			files:      func(int) (string, string, string) { return "", "", "" },
			capacities: []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024},
		},
		{
			// P-cores 0-3 (CPU 1 favoured, 4 % faster), E-cores 4-7.
			name: "hybrid by frequency",
			files: func(c int) (string, string, string) {
				switch {
				case c == 1:
					return "5200000", "1900000", ""
				case c < 4:
					return "5000000", "1900000", ""
				}
				return "3900000", "1400000", ""
			},
			kinds:      []string{"0:efficiency:4-7:798", "1:performance:0-3:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 798, 798, 798, 798},
			perf:       RangeCPUSet(0, 3),
			eff:        RangeCPUSet(4, 7),
		},
		{
			name: "big.LITTLE by capacity",
			files: func(c int) (string, string, string) {
				return "", "", map[bool]string{true: "1024", false: "446"}[c%2 == 0]
			},
			kinds:      []string{"0:efficiency:1,3,5,7:446", "1:performance:0,2,4,6:1024"},
			capacities: []int{1024, 446, 1024, 446, 1024, 446, 1024, 446},
			perf:       NewCPUSet(0, 2, 4, 6),
			eff:        NewCPUSet(1, 3, 5, 7),
		},
		{
			// A capture from a kernel whose largest capacity is not 1024.
			name: "capacity scaled to 1024",
			files: func(c int) (string, string, string) {
				return "", "", map[bool]string{true: "512", false: "256"}[c < 4]
			},
			kinds:      []string{"0:efficiency:4-7:512", "1:performance:0-3:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 512, 512, 512, 512},
			perf:       RangeCPUSet(0, 3),
			eff:        RangeCPUSet(4, 7),
		},
		{
			// Favoured cores of a server: one kind, every CPU alike.
			name: "favoured cores",
			files: func(c int) (string, string, string) {
				return map[bool]string{true: "3900000", false: "3700000"}[c%4 == 1], "2100000", ""
			},
			kinds:      []string{"0::0-7:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024},
		},
		{
			// Two kinds that nothing orders (the same base frequency),
			// named by their capacities.
			name: "unranked",
			files: func(c int) (string, string, string) {
				return map[bool]string{true: "5000000", false: "3900000"}[c < 4], "1900000", ""
			},
			kinds:      []string{"-1:efficiency:4-7:798", "-1:performance:0-3:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 798, 798, 798, 798},
			perf:       RangeCPUSet(0, 3),
			eff:        RangeCPUSet(4, 7),
		},
		{
			// Favoured cores without base frequencies (acpi-cpufreq):
			// hwloc makes them a kind, but within 10 % of the others
			// they are no performance kind.
			name: "favoured cores, maxima only",
			files: func(c int) (string, string, string) {
				return map[bool]string{true: "3900000", false: "3700000"}[c%4 == 1], "", ""
			},
			kinds:      []string{"0::0,2-4,6-7:971", "1::1,5:1024"},
			capacities: []int{971, 1024, 971, 971, 971, 1024, 971, 971},
		},
		{
			// P-, E- and low-power E-cores: one performance kind, two
			// efficiency kinds, ranked by base frequency.
			name: "three kinds",
			files: func(c int) (string, string, string) {
				switch {
				case c < 4:
					return "4800000", "1200000", ""
				case c < 6:
					return "3800000", "900000", ""
				}
				return "2500000", "700000", ""
			},
			kinds:      []string{"0:efficiency:6-7:533", "1:efficiency:4-5:810", "2:performance:0-3:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 810, 810, 533, 533},
			perf:       RangeCPUSet(0, 3),
			eff:        RangeCPUSet(4, 7),
		},
		{
			// Capacity only on some CPUs: neither source covers every
			// CPU, so every CPU counts alike.
			name: "partial",
			files: func(c int) (string, string, string) {
				if c < 4 {
					return "", "", "1024"
				}
				return "", "", ""
			},
			kinds:      []string{"0::0-3:1024"},
			capacities: []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := FromFS(kindsFS(tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got := kindsOf(topo); fmt.Sprint(got) != fmt.Sprint(tc.kinds) {
				t.Errorf("kinds %q, want %q", got, tc.kinds)
			}
			if got := capacities(topo); fmt.Sprint(got) != fmt.Sprint(tc.capacities) {
				t.Errorf("capacities %v, want %v", got, tc.capacities)
			}
			if got := topo.KindCPUs("performance"); !got.Equal(tc.perf) {
				t.Errorf("KindCPUs(performance) = %s, want %s", got, tc.perf)
			}
			if got := topo.KindCPUs("efficiency"); !got.Equal(tc.eff) {
				t.Errorf("KindCPUs(efficiency) = %s, want %s", got, tc.eff)
			}
			for _, c := range topo.CPUs {
				k, ok := topo.KindOf(c.ID)
				switch {
				case ok && !k.CPUs.Has(c.ID):
					t.Errorf("CPU %d: KindOf gives a kind of CPUs %s", c.ID, k.CPUs)
				case !ok && c.Kind != -1:
					t.Errorf("CPU %d: Kind %d but KindOf finds none", c.ID, c.Kind)
				case !ok && topo.Kinds != nil && tc.name != "partial":
					t.Errorf("CPU %d is in no kind", c.ID)
				}
			}
		})
	}
}

// A cpufreq file that holds no number is noted and ignored.
func TestKindsMalformedFileIsNoted(t *testing.T) {
	topo, err := FromFS(kindsFS(func(c int) (string, string, string) {
		if c == 3 {
			return "fast", "", ""
		}
		return "3700000", "", ""
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !noted(topo, "cpu3/cpufreq/cpuinfo_max_freq", `"fast"`, "not a number") {
		t.Errorf("no note about cpu3's cpuinfo_max_freq: %q", topo.Degraded)
	}
	if got := kindsOf(topo); len(got) != 1 || got[0] != "0::0-2,4-7:1024" {
		t.Errorf("kinds %q, want one kind without CPU 3", got)
	}
}

// adjustMaxFreqs merges maxima within 10 % of the lowest, and only among
// CPUs of one base frequency: at 10 % and above they stay apart.
func TestAdjustMaxFreqs(t *testing.T) {
	for _, tc := range []struct {
		hi   uint64
		sets int
	}{{3700, 1}, {4069, 1}, {4070, 2}, {4500, 2}} {
		maxes := []kindSet{{3700, NewCPUSet(0, 1)}, {tc.hi, NewCPUSet(2)}, {5000, NewCPUSet(3)}}
		bases := []kindSet{{2100, NewCPUSet(0, 1, 2)}, {1900, NewCPUSet(3)}}
		if tc.hi == 3700 {
			maxes = []kindSet{{3700, NewCPUSet(0, 1, 2)}, {5000, NewCPUSet(3)}}
		}
		got := adjustMaxFreqs(maxes, bases)
		if len(got) != tc.sets+1 {
			t.Errorf("3700 and %d MHz at one base: %v, want %d sets for them", tc.hi, got, tc.sets)
		}
		if got[len(got)-1].value != 5000 || !got[len(got)-1].cpus.Equal(NewCPUSet(3)) {
			t.Errorf("the CPU of another base frequency moved: %v", got)
		}
	}
}

// On this machine the cpu_core and cpu_atom PMU lists give the core
// types, which order kinds that nothing else orders; a captured tree's
// lists are not read, as hwloc 2.9's Linux backend does not read them.
func TestKindsCoreTypes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   func(cpu int) (maxKHz, baseKHz, capacity string)
		kinds   []string // rank:name:CPUs:capacity:core type, on this machine
		capture []string // the same tree as a capture
	}{
		{
			name:    "core types alone",
			files:   func(int) (string, string, string) { return "", "", "" },
			kinds:   []string{"0:efficiency:4-7:1024:IntelAtom", "1:performance:0-3:1024:IntelCore"},
			capture: nil,
		},
		{
			// The same base frequency: only the core type orders them.
			name: "same base frequency",
			files: func(c int) (string, string, string) {
				return map[bool]string{true: "5000000", false: "3900000"}[c < 4], "1900000", ""
			},
			kinds:   []string{"0:efficiency:4-7:798:IntelAtom", "1:performance:0-3:1024:IntelCore"},
			capture: []string{"-1:efficiency:4-7:798:", "-1:performance:0-3:1024:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kindsFS(tc.files)
			f["sys/devices/cpu_core/cpus"] = &fstest.MapFile{Data: []byte("0-3\n")}
			f["sys/devices/cpu_atom/cpus"] = &fstest.MapFile{Data: []byte("4-7\n")}
			describe := func(topo *Topology) []string {
				var out []string
				for _, k := range topo.Kinds {
					out = append(out, fmt.Sprintf("%d:%s:%s:%d:%s", k.Rank, k.Name, k.CPUs, k.Capacity, k.CoreType))
				}
				return out
			}
			live, err := fromFS(f, "x86_64", true, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(live); fmt.Sprint(got) != fmt.Sprint(tc.kinds) {
				t.Errorf("this machine: kinds %q, want %q", got, tc.kinds)
			}
			capture, err := FromFS(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(capture); fmt.Sprint(got) != fmt.Sprint(tc.capture) {
				t.Errorf("capture: kinds %q, want %q", got, tc.capture)
			}
		})
	}
}
