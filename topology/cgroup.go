package topology

import (
	"path"
	"slices"
	"strings"
)

// readAllowed sets the CPUs and nodes this process may use: the cgroup
// cpuset it lives in (cgroup v2, v1, or the legacy cpuset filesystem), then
// the Cpus_allowed_list and Mems_allowed_list of /proc/self/status, which
// also reflect taskset, numactl and the batch system's binding.
//
// Each of these files narrows the sets only when it can be read and
// leaves some online CPU (some node); one that is missing adds nothing,
// and one that is empty, unreadable (a directory, a symlink loop, too
// large), malformed or disjoint from what is online is noted and adds
// nothing either, as hwloc ignores a cpuset file it fails to read.
func (r *reader) readAllowed(t *Topology) {
	t.Allowed = t.Online
	var all CPUSet
	for _, n := range t.Nodes {
		all.Add(n.ID)
	}
	t.AllowedMems = all

	cs := r.cgroupCpuset()
	if cs.haveCPUs {
		t.Allowed = r.narrow(t.Allowed, cs.cpus, cs.cpusFile, "CPU")
	}
	if cs.haveMems {
		t.AllowedMems = r.narrow(t.AllowedMems, cs.mems, cs.memsFile, "node")
	}
	const status = "proc/self/status"
	var lines []byte
	ok := r.optionalLines(status, func(line string) bool {
		if strings.HasPrefix(line, "Cpus_allowed_list:") || strings.HasPrefix(line, "Mems_allowed_list:") {
			lines = append(append(lines, line...), '\n')
		}
		return true
	})
	if ok {
		st, err := parseStatus(lines)
		switch {
		case err != nil:
			r.note("%s: %v: ignored", status, err)
		default:
			if st.hasCPUs && r.statusCPUs {
				t.Allowed = r.narrow(t.Allowed, st.cpus, status+" Cpus_allowed_list", "CPU")
			}
			if st.hasMems {
				t.AllowedMems = r.narrow(t.AllowedMems, st.mems, status+" Mems_allowed_list", "node")
			}
		}
	}
	t.restrict()
}

// narrow returns have ∩ by, or have with a note when that leaves nothing.
func (r *reader) narrow(have, by CPUSet, file, what string) CPUSet {
	if by.IsEmpty() {
		r.note("%s is \"\" (empty): ignored", file)
		return have
	}
	if !have.Intersects(by) {
		r.note("%s allows %ss %s, none of them among %s: ignored", file, what, by.short(), have.short())
		return have
	}
	return have.And(by)
}

// restrict marks each CPU and node by the Allowed and AllowedMems sets.
func (t *Topology) restrict() {
	for i := range t.CPUs {
		t.CPUs[i].Allowed = t.Allowed.Has(t.CPUs[i].ID)
	}
	for i := range t.Nodes {
		t.Nodes[i].Allowed = t.AllowedMems.Has(t.Nodes[i].ID)
	}
}

type cpuset struct {
	cpus, mems         CPUSet
	haveCPUs, haveMems bool
	cpusFile, memsFile string // the files read, for notes
}

// cgroupCpuset finds the cpuset controller's mount, the process's cgroup
// in it, and reads the cpus and mems files of that cgroup, with hwloc's
// rules:
//   - the mount is the first /proc/mounts entry of type cgroup2 whose
//     cgroup.controllers lists cpuset, of type cpuset, or of type cgroup
//     with the cpuset option;
//   - the cgroup is /proc/self/cpuset, else the ":cpuset:" or "0::" line
//     of /proc/self/cgroup;
//   - the files are cpuset.cpus.effective and cpuset.mems.effective on
//     cgroup v2, cpuset.cpus and cpuset.mems on v1, cpus and mems on the
//     legacy filesystem or a v1 mount with the noprefix option.
//
// A missing file means no restriction; an unreadable or malformed one is
// noted and means none either.
func (r *reader) cgroupCpuset() cpuset {
	var cs cpuset
	var mnt *mount
	r.optionalLines("proc/mounts", func(line string) bool {
		m, ok := parseMount(line)
		if !ok {
			return true
		}
		switch {
		case m.fstype == "cgroup2":
			c, ok := r.optional(fsPath(m.dir, "cgroup.controllers"))
			if ok && slices.Contains(strings.Fields(clean(c)), "cpuset") {
				mnt = &m
			}
		case m.fstype == "cpuset", m.fstype == "cgroup" && slices.Contains(m.options, "cpuset"):
			mnt = &m
		}
		return mnt == nil
	})
	if mnt == nil {
		return cs
	}
	group, ok := r.cgroupPath(mnt.fstype == "cgroup2")
	if !ok {
		return cs
	}
	cpusFile, memsFile := "cpuset.cpus", "cpuset.mems"
	switch {
	case mnt.fstype == "cgroup2":
		cpusFile, memsFile = "cpuset.cpus.effective", "cpuset.mems.effective"
	case mnt.fstype == "cpuset", slices.Contains(mnt.options, "noprefix"):
		cpusFile, memsFile = "cpus", "mems"
	}
	cs.cpusFile, cs.memsFile = fsPath(mnt.dir, group, cpusFile), fsPath(mnt.dir, group, memsFile)
	cs.cpus, cs.haveCPUs = r.cpuSetFile(cs.cpusFile)
	cs.mems, cs.haveMems = r.cpuSetFile(cs.memsFile)
	return cs
}

// cpuSetFile reads a cgroup's list file; false when it is missing, or
// unreadable or malformed (noted).
func (r *reader) cpuSetFile(p string) (CPUSet, bool) {
	b, ok := r.optional(p)
	if !ok {
		return CPUSet{}, false
	}
	set, err := ParseCPUList(b)
	if err != nil {
		r.note("%s: %v: ignored", p, err)
		return CPUSet{}, false
	}
	return set, true
}

// cgroupPath returns the process's cgroup relative to the cpuset mount:
// the unified hierarchy's "0::" line for cgroup v2, the line naming the
// cpuset controller for v1.
func (r *reader) cgroupPath(v2 bool) (string, bool) {
	if b, ok := r.optional("proc/self/cpuset"); ok {
		if p := clean(b); p != "" {
			return p, true
		}
	}
	// Lines are "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)).
	group, found := "", false
	r.optionalLines("proc/self/cgroup", func(line string) bool {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			return true
		}
		unified := parts[0] == "0" && parts[1] == ""
		if unified == v2 && (unified || slices.Contains(strings.Split(parts[1], ","), "cpuset")) {
			group, found = parts[2], true
			return false
		}
		return true
	})
	return group, found
}

// fsPath joins absolute path pieces into an fs.FS path (no leading slash).
func fsPath(elem ...string) string {
	return strings.TrimPrefix(path.Clean("/"+path.Join(elem...)), "/")
}
