package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// Kind is one kind of CPU of a hybrid machine: Intel's P- and E-cores,
// Arm's big and little cores. The kinds are hwloc's cpukinds: CPUs that
// the kernel describes alike (same maximum and base frequency, same
// cpu_capacity) form one kind.
type Kind struct {
	// Rank orders the kinds by performance as hwloc's cpukind efficiency
	// does: 0 for the least powerful kind, len(Kinds)-1 for the most
	// powerful. It is -1 for every kind when the kernel's figures do not
	// order them (two kinds with the same base frequency, for instance),
	// as hwloc then leaves the efficiency unknown.
	Rank int

	// Name is "performance" or "efficiency" when there are two or more
	// kinds: the kind's CoreType decides where it is known (IntelCore,
	// IntelAtom); otherwise a kind whose Capacity is within
	// adjustMaxPercent of the most capable CPU's is a performance kind and the others are
	// efficiency kinds, provided some kind is below that. Kinds that
	// differ by less (the favoured cores of a server whose base frequency
	// the kernel does not give) have no name, nor has the only kind of a
	// machine: their CPUs are alike for placement.
	Name string

	CPUs CPUSet // online CPUs of the kind

	// What the kernel says about the kind's CPUs (hwloc's infos
	// FrequencyMaxMHz, FrequencyBaseMHz and LinuxCapacity); 0 where it
	// says nothing. MaxMHz is the lowest maximum frequency among CPUs of
	// the same base frequency when those differ by less than
	// adjustMaxPercent (the favoured cores of Intel's Turbo Boost Max 3.0).
	MaxMHz        int
	BaseMHz       int
	LinuxCapacity int // cpu_capacity: the kernel's scale, 1024 for its most capable CPU

	// CoreType is "IntelCore" or "IntelAtom" (hwloc's CoreType) for the
	// CPUs the kernel's cpu_core or cpu_atom PMU lists, read on this
	// machine only; "" otherwise.
	CoreType string

	// Capacity is the relative capacity of each CPU of the kind; see
	// CPU.Capacity.
	Capacity int
}

// fullCapacity is the Capacity of the most capable CPU, the scale the
// kernel's cpu_capacity uses.
const fullCapacity = 1024

// efficiencyCapacity is the Capacity of a synthetic efficiency CPU: half
// that of a performance CPU.
const efficiencyCapacity = fullCapacity / 2

// adjustMaxPercent is how far the maximum frequencies of CPUs with the same
// base frequency may differ (relative to the lowest) and still be taken as
// one: hwloc's default (HWLOC_CPUKINDS_MAXFREQ=adjust=10), which keeps
// favoured cores in the kind of the other cores.
const adjustMaxPercent = 10

// cpuKindFiles is what sysfs says about one online CPU's kind; 0 is unknown.
type cpuKindFiles struct {
	id               int
	maxMHz, baseMHz  uint64
	capacity         uint64
	hasCapacityValue bool // cpu_capacity was read (hwloc keeps a value of 0)
}

// readKinds reads each online CPU's cpufreq/cpuinfo_max_freq,
// cpufreq/base_frequency (intel_pstate) and cpu_capacity, as hwloc's Linux
// backend does, and makes t.Kinds and each CPU's Kind and Capacity.
func (r *reader) readKinds(t *Topology) {
	var cpus []cpuKindFiles
	for id := range t.Online.All() {
		dir := fmt.Sprintf("%s/cpu%d/", cpuDir, id)
		c := cpuKindFiles{id: id}
		if v, ok := r.kernelUint(dir + "cpufreq/cpuinfo_max_freq"); ok {
			c.maxMHz = v / 1000 // kHz
		}
		if v, ok := r.kernelUint(dir + "cpufreq/base_frequency"); ok {
			c.baseMHz = v / 1000
		}
		c.capacity, c.hasCapacityValue = r.kernelUint(dir + "cpu_capacity")
		cpus = append(cpus, c)
	}
	var coreTypes []coreTypeSet
	if r.live {
		coreTypes = r.readCoreTypes(t.Online)
	}
	t.Kinds = buildKinds(cpus, coreTypes)
	t.setCapacities(cpus)
}

// coreTypeSet is the CPUs of one core type.
type coreTypeSet struct {
	name string // hwloc's CoreType: "IntelAtom" or "IntelCore"
	cpus CPUSet
}

// readCoreTypes reads the CPU lists of Intel's hybrid PMUs,
// devices/cpu_atom/cpus and devices/cpu_core/cpus ("12-19\n"), which the
// kernel makes from each CPU's CPUID core type (leaf 0x1A): the core types
// hwloc 2.9 takes from CPUID in its x86 backend on the machine itself.
// hwloc 2.9's Linux backend does not read these lists, so they are read
// on this machine only, never in a captured tree. Only hwloc 2.9's two
// types are read (not cpu_lowpower); a list that is unreadable or names
// no online CPU is left out.
func (r *reader) readCoreTypes(online CPUSet) []coreTypeSet {
	var out []coreTypeSet
	for _, pmu := range []struct{ file, name string }{
		{"sys/devices/cpu_atom/cpus", "IntelAtom"},
		{"sys/devices/cpu_core/cpus", "IntelCore"},
	} {
		b, ok := r.optional(pmu.file)
		if !ok {
			continue
		}
		set, err := ParseCPUList(b)
		if err != nil {
			r.note("%s: %v: core type unknown", pmu.file, err)
			continue
		}
		if cpus := set.And(online); !cpus.IsEmpty() {
			out = append(out, coreTypeSet{name: pmu.name, cpus: cpus})
		}
	}
	return out
}

// kernelUint reads a file holding one unsigned decimal number, such as
// cpuinfo_max_freq ("4700000\n", kHz) or cpu_capacity ("1024\n"). A missing
// or empty file is no value; one that holds no number is no value too,
// with a note (hwloc's strtoul would read it as 0).
func (r *reader) kernelUint(p string) (uint64, bool) {
	b, ok := r.optional(p)
	if !ok {
		return 0, false
	}
	v := clean(b)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		r.note("%s is %s, not a number: ignored", p, quote(v))
		return 0, false
	}
	return n, true
}

// kindSet is a set of CPUs sharing one value of one source.
type kindSet struct {
	value uint64
	cpus  CPUSet
}

// addToSets puts cpu in the set of its value, making one in order of
// first appearance (hwloc_linux_cpukinds_add).
func addToSets(sets []kindSet, cpu int, value uint64) []kindSet {
	for i := range sets {
		if sets[i].value == value {
			sets[i].cpus.Add(cpu)
			return sets
		}
	}
	return append(sets, kindSet{value: value, cpus: NewCPUSet(cpu)})
}

// adjustMaxFreqs merges, for each set of CPUs with one base frequency,
// maximum frequencies that differ by less than adjustMaxPercent into the
// lowest of them (hwloc_linux_cpukinds_adjust_maxfreqs): Turbo Boost Max
// 3.0 raises the maximum of a few favoured cores, which are no other kind.
func adjustMaxFreqs(maxes, bases []kindSet) []kindSet {
	for _, base := range bases {
		lo, hi := uint64(1<<32-1), uint64(0)
		for _, m := range maxes {
			if m.cpus.Intersects(base.cpus) {
				lo, hi = min(lo, m.value), max(hi, m.value)
			}
		}
		if hi == 0 || lo == hi {
			continue
		}
		// hwloc computes the ratio in float; so does this, to agree at the edge.
		if ratio := float32(hi-lo) / float32(lo); ratio*100 >= adjustMaxPercent {
			continue
		}
		first := slices.IndexFunc(maxes, func(m kindSet) bool { return m.value == lo })
		for i := 0; i < len(maxes); i++ {
			if i == first {
				continue
			}
			moved := maxes[i].cpus.And(base.cpus)
			if moved.IsEmpty() {
				continue
			}
			maxes[first].cpus = maxes[first].cpus.Or(moved)
			maxes[i].cpus = maxes[i].cpus.AndNot(moved)
			if maxes[i].cpus.IsEmpty() {
				maxes = slices.Delete(maxes, i, i+1)
				if i < first {
					first--
				}
				i--
			}
		}
	}
	return maxes
}

// kindInfo is one attribute of a kind being built; kinds keep hwloc's
// infos so that ranking reads them as hwloc does.
type kindInfo struct {
	name  string // "FrequencyMaxMHz", "FrequencyBaseMHz", "LinuxCapacity" or "CoreType"
	value uint64 // for CoreType: 1 for IntelAtom, 2 for IntelCore, as hwloc 2.9 ranks them
}

// coreTypeRank is hwloc 2.9's order of core types (cpukinds.c
// hwloc__cpukinds_summarize_info): Atom below Core.
var coreTypeRank = map[string]uint64{"IntelAtom": 1, "IntelCore": 2}

// protoKind is a kind while sources are registered.
type protoKind struct {
	cpus   CPUSet
	infos  []kindInfo
	forced int // forced efficiency, -1 if none
}

func addInfo(infos []kindInfo, add ...kindInfo) []kindInfo {
	for _, a := range add {
		if !slices.Contains(infos, a) {
			infos = append(infos, a)
		}
	}
	return infos
}

// register adds one set of CPUs with its attributes, splitting the kinds
// it overlaps (hwloc_internal_cpukinds_register): the CPUs it shares with
// a kind become a new kind with both kinds' attributes, appended; a kind
// it covers gets its attributes; CPUs in no kind yet form one more kind.
func register(kinds []protoKind, cpus CPUSet, info kindInfo, forced int) []protoKind {
	old := len(kinds)
	for i := 0; i < old && !cpus.IsEmpty(); i++ {
		k := &kinds[i]
		common := cpus.And(k.cpus)
		switch {
		case common.IsEmpty():
		case common.Equal(k.cpus): // the new set covers the kind
			k.infos = addInfo(k.infos, info)
			if k.forced < 0 {
				k.forced = forced
			}
			cpus = cpus.AndNot(common)
		default: // the new set covers part of the kind
			split := protoKind{cpus: common, forced: forced}
			split.infos = addInfo(addInfo(nil, k.infos...), info)
			k.cpus = k.cpus.AndNot(common)
			cpus = cpus.AndNot(common)
			kinds = append(kinds, split)
		}
	}
	if !cpus.IsEmpty() {
		kinds = append(kinds, protoKind{cpus: cpus, infos: []kindInfo{info}, forced: forced})
	}
	return kinds
}

// registerSets registers a source's sets by increasing value, as hwloc's
// Linux backend does (lower frequency or capacity, less performance);
// forced gives each set its position as forced efficiency.
func registerSets(kinds []protoKind, sets []kindSet, name string, forced bool) []protoKind {
	sets = slices.Clone(sets)
	slices.SortFunc(sets, func(a, b kindSet) int { return cmp.Compare(a.value, b.value) })
	for i, s := range sets {
		f := -1
		if forced {
			f = i
		}
		kinds = register(kinds, s.cpus, kindInfo{name, s.value}, f)
	}
	return kinds
}

// buildKinds makes the kinds of cpus as hwloc 2.9's Linux backend and its
// ranking do (topology-linux.c look_sysfscpukinds, cpukinds.c
// hwloc_internal_cpukinds_rank).
// Core types are registered last, as hwloc registers the x86 backend's
// after the Linux backend's kinds.
func buildKinds(cpus []cpuKindFiles, coreTypes []coreTypeSet) []Kind {
	var maxes, bases, capacities []kindSet
	maxWithoutBase := false
	for _, c := range cpus {
		if c.maxMHz > 0 {
			maxes = addToSets(maxes, c.id, c.maxMHz)
		}
		if c.baseMHz > 0 {
			bases = addToSets(bases, c.id, c.baseMHz)
		}
		if c.maxMHz > 0 && c.baseMHz == 0 {
			maxWithoutBase = true
		}
		if c.hasCapacityValue {
			capacities = addToSets(capacities, c.id, c.capacity)
		}
	}
	if len(maxes) > 0 && !maxWithoutBase {
		maxes = adjustMaxFreqs(maxes, bases)
	}
	var kinds []protoKind
	kinds = registerSets(kinds, maxes, "FrequencyMaxMHz", false)
	kinds = registerSets(kinds, bases, "FrequencyBaseMHz", false)
	kinds = registerSets(kinds, capacities, "LinuxCapacity", true)
	for _, ct := range coreTypes {
		kinds = register(kinds, ct.cpus, kindInfo{"CoreType", coreTypeRank[ct.name]}, -1)
	}
	return rankKinds(kinds)
}

// rankKinds orders kinds as hwloc's default ranking does: by forced
// efficiency (the order of cpu_capacity) when every kind has a distinct
// one; else by core type (when every kind has one, or any frequency
// below decides) and then base frequency when every kind has one, else
// maximum frequency when every kind has one; values must be distinct.
// When no rule orders them, the kinds keep their order and every Rank is
// -1.
func rankKinds(protos []protoKind) []Kind {
	kinds := make([]Kind, len(protos))
	for i, p := range protos {
		k := Kind{Rank: -1, CPUs: p.cpus}
		for _, info := range p.infos {
			switch info.name {
			case "FrequencyMaxMHz":
				k.MaxMHz = int(info.value)
			case "FrequencyBaseMHz":
				k.BaseMHz = int(info.value)
			case "LinuxCapacity":
				k.LinuxCapacity = int(info.value)
			case "CoreType":
				for name, v := range coreTypeRank {
					if v == info.value {
						k.CoreType = name
					}
				}
			}
		}
		kinds[i] = k
	}
	switch len(kinds) {
	case 0:
		return nil
	case 1:
		kinds[0].Rank = 0
		return kinds
	}
	order := func(value func(i int) int) bool {
		values := make([]int, len(kinds))
		for i := range kinds {
			if values[i] = value(i); values[i] < 0 {
				return false
			}
		}
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		if len(slices.Compact(sorted)) != len(values) {
			return false // equal values: hwloc gives up
		}
		for i := range kinds {
			kinds[i].Rank = slices.Index(sorted, values[i])
		}
		slices.SortFunc(kinds, func(a, b Kind) int { return cmp.Compare(a.Rank, b.Rank) })
		return true
	}
	all := func(f func(i int) int) bool {
		for i := range kinds {
			if f(i) == 0 {
				return false
			}
		}
		return true
	}
	// hwloc's coretype+frequency value: the core type above 2^20 MHz.
	coreType := func(i int) int { return int(coreTypeRank[kinds[i].CoreType]) << 20 }
	baseMHz := func(i int) int { return kinds[i].BaseMHz }
	maxMHz := func(i int) int { return kinds[i].MaxMHz }
	switch {
	case order(func(i int) int { return protos[i].forced }):
	case all(baseMHz):
		order(func(i int) int { return coreType(i) + baseMHz(i) })
	case all(maxMHz):
		order(func(i int) int { return coreType(i) + maxMHz(i) })
	case all(coreType):
		order(func(i int) int { return coreType(i) + maxMHz(i) })
	}
	return kinds
}

// nameKinds names the kinds by core type or capacity; see Kind.Name.
// Capacities within adjustMaxPercent of fullCapacity count as full: the
// tolerance hwloc gives favoured cores.
func (t *Topology) nameKinds() {
	if len(t.Kinds) < 2 {
		return
	}
	full := func(k Kind) bool { return k.Capacity*100 > fullCapacity*(100-adjustMaxPercent) }
	differ := slices.ContainsFunc(t.Kinds, func(k Kind) bool { return !full(k) })
	for i := range t.Kinds {
		k := &t.Kinds[i]
		switch {
		case k.CoreType == "IntelCore", k.CoreType == "" && differ && full(*k):
			k.Name = "performance"
		case k.CoreType == "IntelAtom", k.CoreType == "" && differ:
			k.Name = "efficiency"
		}
	}
}

// setCapacities sets each CPU's Kind and Capacity, and each kind's
// Capacity: from cpu_capacity when every online CPU has one above 0,
// else from the maximum frequency (of its kind) when every online CPU
// has one, else fullCapacity for all. The most capable CPU gets
// fullCapacity, the others their share of it.
func (t *Topology) setCapacities(cpus []cpuKindFiles) {
	kindOf := make(map[int]int, len(t.CPUs))
	for k, kind := range t.Kinds {
		for id := range kind.CPUs.All() {
			kindOf[id] = k
		}
	}
	value := func(id int) int { return 0 }
	switch {
	case len(cpus) > 0 && !slices.ContainsFunc(cpus, func(c cpuKindFiles) bool { return c.capacity == 0 }):
		value = func(id int) int { return t.Kinds[kindOf[id]].LinuxCapacity }
	case len(cpus) > 0 && !slices.ContainsFunc(cpus, func(c cpuKindFiles) bool { return c.maxMHz == 0 }):
		value = func(id int) int { return t.Kinds[kindOf[id]].MaxMHz }
	}
	top := 0
	for _, c := range t.CPUs {
		top = max(top, value(c.ID))
	}
	capacity := func(id int) int {
		if top == 0 {
			return fullCapacity
		}
		return max(1, value(id)*fullCapacity/top)
	}
	for i := range t.CPUs {
		c := &t.CPUs[i]
		c.Kind, c.Capacity = -1, capacity(c.ID)
		if k, ok := kindOf[c.ID]; ok {
			c.Kind = k
		}
	}
	for k := range t.Kinds {
		t.Kinds[k].Capacity = capacity(t.Kinds[k].CPUs.First())
	}
	t.nameKinds()
}

// KindOf returns the kind of the online CPU with the given ID, and false
// if the CPU is unknown or in no kind.
func (t *Topology) KindOf(id int) (Kind, bool) {
	c, ok := t.CPU(id)
	if !ok || c.Kind < 0 || c.Kind >= len(t.Kinds) {
		return Kind{}, false
	}
	return t.Kinds[c.Kind], true
}

// KindCPUs returns the online CPUs of the kinds named name ("performance"
// or "efficiency"; several kinds may share a name). It is empty when no
// kind has the name, as on a machine whose CPUs are alike.
func (t *Topology) KindCPUs(name string) CPUSet {
	var set CPUSet
	for _, k := range t.Kinds {
		if k.Name == name {
			set = set.Or(k.CPUs)
		}
	}
	return set
}
