package topology

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
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
// each online CPU's core, die, cluster, package and caches.
func (r *reader) readCPUs(t *Topology) error {
	ids, err := r.numberedEntries(cpuDir, "cpu")
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%w: %s has no cpuN directory", ErrTopology, cpuDir)
	}
	online, haveOnline, err := r.maskOrList(cpuDir + "/online")
	if err != nil {
		return err
	}
	if !haveOnline {
		r.note("%s/online is missing: a CPU is online unless its cpuN/online says 0", cpuDir)
	}
	var withTopology CPUSet
	for _, id := range ids {
		dir := fmt.Sprintf("%s/cpu%d", cpuDir, id)
		if haveOnline {
			if !online.Has(id) {
				t.Offline.Add(id)
				continue
			}
		} else {
			v, ok, err := r.integer(dir + "/online")
			if err != nil {
				return err
			}
			if ok && v == 0 {
				t.Offline.Add(id)
				continue
			}
		}
		t.Online.Add(id)
		if r.exists(dir + "/topology") {
			withTopology.Add(id)
		}
	}
	if t.Online.IsEmpty() {
		return fmt.Errorf("%w: no online CPU among %s", ErrTopology, NewCPUSet(ids...))
	}
	if missing := t.Online.AndNot(withTopology); !missing.IsEmpty() {
		r.note("online CPUs %s have no topology directory: their core and package are unknown", missing)
	}

	raws := make([]rawCPU, 0, t.Online.Len())
	for id := range t.Online.All() {
		raw, err := r.readCPUTopology(id, withTopology)
		if err != nil {
			return err
		}
		raws = append(raws, raw)
	}
	r.buildCPUObjects(t, raws)
	if err := r.readCaches(t, withTopology); err != nil {
		return err
	}
	return nil
}

func (r *reader) readCPUTopology(id int, cpuset CPUSet) (rawCPU, error) {
	raw := rawCPU{id: id, pkgID: -1, dieID: -1, coreID: -1, clusterID: -1, hasTopology: cpuset.Has(id)}
	self := NewCPUSet(id)
	raw.core, raw.pkg, raw.die, raw.cluster = self, self, self, self
	if !raw.hasTopology {
		return raw, nil
	}
	dir := fmt.Sprintf("%s/cpu%d/topology/", cpuDir, id)
	ids := []struct {
		name string
		dst  *int
	}{
		{"physical_package_id", &raw.pkgID},
		{"die_id", &raw.dieID},
		{"core_id", &raw.coreID},
		{"cluster_id", &raw.clusterID},
	}
	for _, f := range ids {
		v, ok, err := r.integer(dir + f.name)
		if err != nil {
			return raw, err
		}
		if ok {
			*f.dst = v
		}
	}
	if raw.pkgID < 0 {
		raw.pkgID = -1 // some kernels (POWER LPARs) say -1: no package number
	}
	sets := []struct {
		files []string
		dst   *CPUSet
		found *bool
	}{
		{[]string{"core_cpus", "thread_siblings", "core_cpus_list", "thread_siblings_list"}, &raw.core, nil},
		{[]string{"package_cpus", "core_siblings", "package_cpus_list", "core_siblings_list"}, &raw.pkg, &raw.hasPkgSet},
		{[]string{"die_cpus", "die_cpus_list"}, &raw.die, &raw.hasDieSet},
		{[]string{"cluster_cpus", "cluster_cpus_list"}, &raw.cluster, nil},
	}
	for _, s := range sets {
		names := make([]string, len(s.files))
		for i, f := range s.files {
			names[i] = dir + f
		}
		set, found, err := r.maskOrList(names...)
		if err != nil {
			return raw, err
		}
		if s.found != nil {
			*s.found = found
		}
		if found {
			set = set.And(cpuset)
			set.Add(id) // a CPU always shares its own core, whatever the file says
			*s.dst = set
		}
	}
	return raw, nil
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
}

// readCaches reads cpuN/cache/indexK for every CPU with topology. A cache
// is reported once, by the first CPU of its shared_cpu_map.
func (r *reader) readCaches(t *Topology, cpuset CPUSet) error {
	for i := range t.CPUs {
		c := &t.CPUs[i]
		if !cpuset.Has(c.ID) {
			continue
		}
		dir := fmt.Sprintf("%s/cpu%d/cache", cpuDir, c.ID)
		idx, err := r.numberedEntries(dir, "index")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, k := range idx {
			cache, ok, err := r.readCache(fmt.Sprintf("%s/index%d", dir, k), c, cpuset)
			if err != nil {
				return err
			}
			if ok && cache.CPUs.First() == c.ID {
				t.Caches = append(t.Caches, cache)
			}
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
	return nil
}

func (r *reader) readCache(dir string, c *CPU, cpuset CPUSet) (Cache, bool, error) {
	level, ok, err := r.integer(dir + "/level")
	if err != nil || !ok {
		return Cache{}, false, err
	}
	cache := Cache{Level: level, Type: "Unified"}
	if b, err := r.read(dir + "/type"); err == nil {
		switch typ := clean(b); {
		case strings.HasPrefix(typ, "Data"):
			cache.Type = "Data"
		case strings.HasPrefix(typ, "Instruction"):
			cache.Type = "Instruction"
		}
	}
	if level < 1 || level > 5 || (cache.Type == "Instruction" && level > 3) {
		return Cache{}, false, nil // hwloc has no object for such a cache
	}
	shared, found, err := r.maskOrList(dir+"/shared_cpu_map", dir+"/shared_cpu_list")
	if err != nil {
		return Cache{}, false, err
	}
	if !found {
		return Cache{}, false, nil
	}
	if shared.IsEmpty() {
		shared = c.Siblings // some kernels leave the map of a private cache empty
	}
	cache.CPUs = shared.And(cpuset)
	if b, err := r.read(dir + "/size"); err == nil {
		size, err := parseCacheSize(b)
		if err != nil {
			return Cache{}, false, wrap(path.Join(dir, "size"), err)
		}
		cache.SizeBytes = size
	}
	if cache.SizeBytes == 0 && level == 3 && r.knl {
		return Cache{}, false, nil // Xeon Phi reports its MCDRAM cache mode as an empty L3
	}
	if line, ok, err := r.integer(dir + "/coherency_line_size"); err != nil {
		return Cache{}, false, err
	} else if ok {
		cache.LineSize = line
	}
	return cache, true, nil
}
