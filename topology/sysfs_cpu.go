package topology

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// rawCPU is what sysfs says about one online CPU before objects are built.
type rawCPU struct {
	id                      int
	hasTopology             bool
	pkgID, dieID, coreID    int
	clusterID               int
	core, pkg, die, cluster CPUSet // sibling sets ∩ the CPUs with topology
	hasPkgSet, hasDieSet    bool
}

// readCPUs reads devices/system/cpu: which CPUs exist and are online, and
// each online CPU's core, die, cluster, package and caches. Only a CPU
// directory that cannot be listed, or holds no online CPU, is an error.
func (r *reader) readCPUs(t *Topology) error {
	ids, err := r.numberedEntries(cpuDir, "cpu")
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s has no cpuN directory", ErrTopology, cpuDir)
	}
	online, onlineText, haveOnline := r.readOnline()
	var withTopology CPUSet
	for _, id := range ids {
		dir := fmt.Sprintf("%s/cpu%d", cpuDir, id)
		if haveOnline && !online.Has(id) || !haveOnline && r.cpuOffline(dir+"/online") {
			t.Offline.Add(id)
			continue
		}
		t.Online.Add(id)
		if r.present(dir + "/topology") {
			withTopology.Add(id)
		}
	}
	if t.Online.IsEmpty() {
		if haveOnline {
			return fmt.Errorf("%w: %s/online is %s: none of the CPUs with a cpuN directory (%s) is online", ErrTopology, cpuDir, quote(onlineText), NewCPUSet(ids...).short())
		}
		return fmt.Errorf("%w: %s/cpuN/online says 0 for every CPU with a cpuN directory (%s)", ErrTopology, cpuDir, NewCPUSet(ids...).short())
	}
	if missing := t.Online.AndNot(withTopology); !missing.IsEmpty() {
		r.note("online CPUs %s have no topology directory: their core and package are unknown", missing.short())
	}

	raws := make([]rawCPU, 0, t.Online.Len())
	for id := range t.Online.All() {
		raws = append(raws, r.readCPUTopology(id, withTopology))
	}
	r.buildCPUObjects(t, raws)
	r.readCaches(t, withTopology)
	return nil
}

// readOnline reads cpu/online. Like a missing file (old kernels), one that
// is empty, unreadable or malformed leaves each CPU's own online file to
// decide; hwloc would read an empty or malformed list as CPU 0 alone.
func (r *reader) readOnline() (set CPUSet, text string, ok bool) {
	p := cpuDir + "/online"
	const instead = "a CPU is online unless its cpuN/online says 0"
	b, found := r.optional(p)
	if !found {
		r.note("%s is missing or unreadable: %s", p, instead)
		return CPUSet{}, "", false
	}
	text = clean(b)
	set, err := ParseCPUList(b)
	switch {
	case err != nil:
		r.note("%s: %v: %s", p, err, instead)
		return CPUSet{}, text, false
	case set.IsEmpty():
		r.note("%s is %s: %s", p, quote(text), instead)
		return CPUSet{}, text, false
	}
	return set, text, true
}

// cpuOffline reads a CPU's own online file, as hwloc does when there is no
// cpu/online: only "0" means offline. A missing or empty file (old kernels
// leave some so; cpu0 often has none) means online; so does any other
// value, with a note (hwloc's atoi would take text for 0).
func (r *reader) cpuOffline(p string) bool {
	b, ok := r.optional(p)
	if !ok {
		return false
	}
	v := clean(b)
	n, err := strconv.Atoi(v)
	switch {
	case v == "":
		r.note("%s is \"\" (empty): CPU taken as online", p)
	case err != nil || n < 0:
		r.note("%s is %s, not 0 or 1: CPU taken as online", p, quote(v))
	}
	return err == nil && n == 0
}

// topologyID reads one of a CPU's numbers (core_id, physical_package_id,
// die_id, cluster_id): -1, unknown, when the file is missing, empty,
// malformed or negative, as hwloc leaves the number unknown when it cannot
// read it. Only quiet may be -1 without a note: the kernel's way of saying
// that the level has no number (POWER packages, arm64 dies).
func (r *reader) topologyID(p string, quiet bool) int {
	b, ok := r.optional(p)
	if !ok {
		return -1
	}
	v := clean(b)
	n, err := strconv.Atoi(v)
	switch {
	case v == "":
		r.note("%s is \"\" (empty): number unknown", p)
	case err != nil || n > math.MaxInt32:
		r.note("%s is %s, not a number: number unknown", p, quote(v))
	case n == -1 && quiet:
	case n < 0:
		r.note("%s is %s, negative: number unknown", p, quote(v))
	default:
		return n
	}
	return -1
}

func (r *reader) readCPUTopology(id int, cpuset CPUSet) rawCPU {
	raw := rawCPU{id: id, pkgID: -1, dieID: -1, coreID: -1, clusterID: -1, hasTopology: cpuset.Has(id)}
	self := NewCPUSet(id)
	raw.core, raw.pkg, raw.die, raw.cluster = self, self, self, self
	if !raw.hasTopology {
		return raw
	}
	dir := fmt.Sprintf("%s/cpu%d/topology/", cpuDir, id)
	raw.pkgID = r.topologyID(dir+"physical_package_id", true)
	raw.dieID = r.topologyID(dir+"die_id", true)
	raw.coreID = r.topologyID(dir+"core_id", false)
	raw.clusterID = r.topologyID(dir+"cluster_id", true)
	sets := []struct {
		files   []string
		dst     *CPUSet
		found   *bool
		instead string
	}{
		{[]string{"core_cpus", "thread_siblings", "core_cpus_list", "thread_siblings_list"}, &raw.core, nil, "the CPU is a core of its own"},
		{[]string{"package_cpus", "core_siblings", "package_cpus_list", "core_siblings_list"}, &raw.pkg, &raw.hasPkgSet, "package by physical_package_id"},
		{[]string{"die_cpus", "die_cpus_list"}, &raw.die, &raw.hasDieSet, "no die"},
		{[]string{"cluster_cpus", "cluster_cpus_list"}, &raw.cluster, nil, "no cluster"},
	}
	for _, s := range sets {
		names := make([]string, len(s.files))
		for i, f := range s.files {
			names[i] = dir + f
		}
		set, found := r.firstCPUSet(s.instead, names...)
		if s.found != nil {
			*s.found = found
		}
		if found {
			set = set.And(cpuset)
			set.Add(id) // a CPU always shares its own core, whatever the file says
			*s.dst = set
		}
	}
	return raw
}

// buildCPUObjects turns the per-CPU sibling sets into cores, packages, dies
// and clusters, the way hwloc does: an object per distinct set, numbered
// by the OS index its first CPU reports.
func (r *reader) buildCPUObjects(t *Topology, raws []rawCPU) {
	byID := make(map[int]*rawCPU, len(raws))
	for i := range raws {
		byID[raws[i].id] = &raws[i]
	}
	// Packages without a package_cpus/core_siblings file: group by number.
	for i := range raws {
		if raws[i].hasTopology && !raws[i].hasPkgSet && raws[i].pkgID >= 0 {
			var set CPUSet
			for _, o := range raws {
				if o.hasTopology && o.pkgID == raws[i].pkgID {
					set.Add(o.id)
				}
			}
			raws[i].pkg = set
		}
	}
	// AMD compute units (family 15h/16h) list both cores of a unit as SMT
	// siblings; their distinct core_ids show they are cores of their own.
	splitCores := false
	if r.amdCU {
		for _, raw := range raws {
			if raw.core.Len() > 1 {
				other := raw.core.First()
				if other == raw.id {
					other = raw.core.AndNot(NewCPUSet(raw.id)).First()
				}
				splitCores = byID[other] != nil && byID[other].coreID != raw.coreID
				break
			}
		}
	}
	for _, raw := range raws {
		core := raw.core
		if splitCores {
			core = NewCPUSet(raw.id)
		}
		t.CPUs = append(t.CPUs, CPU{
			ID: raw.id, OS: raw.id, Node: -1, Package: raw.pkgID, Die: raw.dieID, Core: raw.coreID,
			Cluster: raw.clusterID, Siblings: core, LastLevelCache: -1, Allowed: true,
		})
		if !raw.hasTopology {
			continue
		}
		if core.First() == raw.id {
			t.Cores = append(t.Cores, Core{Package: raw.pkgID, ID: raw.coreID, CPUs: core})
		}
		if raw.pkg.First() == raw.id {
			t.Packages = append(t.Packages, Package{ID: raw.pkgID, CPUs: raw.pkg})
		}
		// A die_id of -1 means the architecture has no die level (arm64).
		if raw.hasDieSet && raw.dieID >= 0 && raw.die.First() == raw.id && !raw.die.Equal(raw.pkg) {
			t.Dies = append(t.Dies, Group{ID: raw.dieID, Package: raw.pkgID, CPUs: raw.die})
		}
		if raw.cluster.First() == raw.id && raw.cluster.Len() > 1 {
			t.Clusters = append(t.Clusters, Group{ID: raw.clusterID, Package: -1, CPUs: raw.cluster})
		}
	}
	// A CPU, its core and its die belong to the package that holds the
	// CPU, numbered by the package's first CPU as hwloc numbers it, not by
	// what the CPU's own physical_package_id says.
	pkgOf := make(map[int]int, len(t.CPUs))
	for _, p := range t.Packages {
		for c := range p.CPUs.All() {
			pkgOf[c] = p.ID
		}
	}
	for i := range t.CPUs {
		if id, ok := pkgOf[t.CPUs[i].ID]; ok {
			t.CPUs[i].Package = id
		}
	}
	for i := range t.Cores {
		if id, ok := pkgOf[t.Cores[i].CPUs.First()]; ok {
			t.Cores[i].Package = id
		}
	}
	for i := range t.Dies {
		if id, ok := pkgOf[t.Dies[i].CPUs.First()]; ok {
			t.Dies[i].Package = id
		}
	}
}

// readCaches reads cpuN/cache/indexK for every CPU with topology. A cache
// is reported once, by the first CPU of its shared_cpu_map. A CPU whose
// map is empty (IA-64 kernels leave some so) shares the cache with its
// SMT siblings, as hwloc assumes, unless the maps of other CPUs already
// put it in a cache of that level and type.
func (r *reader) readCaches(t *Topology, cpuset CPUSet) {
	var unmapped []Cache // caches of CPUs whose map is empty
	for i := range t.CPUs {
		c := &t.CPUs[i]
		if !cpuset.Has(c.ID) {
			continue
		}
		dir := fmt.Sprintf("%s/cpu%d/cache", cpuDir, c.ID)
		idx, err := r.numberedEntries(dir, "index")
		if err != nil {
			if !missing(err) {
				r.note("%v: caches unknown", err)
			}
			continue
		}
		for _, k := range idx {
			cache, ok := r.readCache(fmt.Sprintf("%s/index%d", dir, k), cpuset)
			switch {
			case !ok:
			case cache.CPUs.IsEmpty():
				cache.CPUs = c.Siblings.And(cpuset)
				unmapped = append(unmapped, cache)
			case cache.CPUs.First() == c.ID:
				t.Caches = append(t.Caches, cache)
			}
		}
	}
	for _, u := range unmapped {
		if !slices.ContainsFunc(t.Caches, func(c Cache) bool {
			return c.Level == u.Level && c.Type == u.Type && c.CPUs.Intersects(u.CPUs)
		}) {
			t.Caches = append(t.Caches, u)
		}
	}
	slices.SortStableFunc(t.Caches, func(a, b Cache) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), strings.Compare(a.Type, b.Type), cmp.Compare(a.CPUs.First(), b.CPUs.First()))
	})
	// The last-level cache of each CPU: the highest data or unified level.
	for i := range t.CPUs {
		c := &t.CPUs[i]
		for k, cache := range t.Caches {
			if cache.Type == "Instruction" || !cache.CPUs.Has(c.ID) {
				continue
			}
			if c.LastLevelCache < 0 || cache.Level >= t.Caches[c.LastLevelCache].Level {
				c.LastLevelCache = k
			}
		}
	}
}

// readCache reads one cache's files; ok is false when it is no cache
// hwloc would report. An empty CPUs set means an empty shared_cpu_map.
func (r *reader) readCache(dir string, cpuset CPUSet) (cache Cache, ok bool) {
	b, ok := r.optional(dir + "/level")
	if !ok {
		return Cache{}, false
	}
	level, err := strconv.Atoi(clean(b))
	if err != nil || level < 0 {
		r.note("%s/level is %s: cache ignored", dir, quote(clean(b)))
		return Cache{}, false
	}
	cache = Cache{Level: level, Type: "Unified"}
	if b, ok := r.optional(dir + "/type"); ok {
		switch typ := clean(b); {
		case strings.HasPrefix(typ, "Data"):
			cache.Type = "Data"
		case strings.HasPrefix(typ, "Instruction"):
			cache.Type = "Instruction"
		}
	}
	if level < 1 || level > 5 || (cache.Type == "Instruction" && level > 3) {
		return Cache{}, false // hwloc has no object for such a cache
	}
	shared, found := r.firstCPUSet("cache ignored", dir+"/shared_cpu_map", dir+"/shared_cpu_list")
	if !found {
		return Cache{}, false
	}
	if shared.IsEmpty() {
		r.note("%s/shared_cpu_map lists no CPU: the cache is taken as shared by the SMT siblings, unless other CPUs list them in theirs", dir)
	}
	cache.CPUs = shared.And(cpuset)
	if !shared.IsEmpty() && cache.CPUs.IsEmpty() {
		return Cache{}, false // the map names only CPUs without topology
	}
	if b, ok := r.optional(dir + "/size"); ok {
		size, err := parseCacheSize(b)
		switch {
		case clean(b) == "":
			r.note("%s/size is \"\" (empty): size unknown", dir)
		case err != nil:
			r.note("%s/size: %v: size unknown", dir, err)
		default:
			cache.SizeBytes = size
		}
	}
	if cache.SizeBytes == 0 && level == 3 && r.knl {
		return Cache{}, false // Xeon Phi reports its MCDRAM cache mode as an empty L3
	}
	if b, ok := r.optional(dir + "/coherency_line_size"); ok {
		v := clean(b)
		n, err := strconv.Atoi(v)
		switch {
		case v == "":
		case err != nil || n < 0 || n > math.MaxInt32:
			r.note("%s/coherency_line_size is %s: line size unknown", dir, quote(v))
		default:
			cache.LineSize = n
		}
	}
	return cache, true
}
