package topology

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// readAllowed sets the CPUs and nodes this process may use: the cgroup
// cpuset it lives in (cgroup v2, v1, or the legacy cpuset filesystem), then
// the Cpus_allowed_list and Mems_allowed_list of /proc/self/status, which
// also reflect taskset, numactl and the batch system's binding.
func (r *reader) readAllowed(t *Topology) error {
	t.Allowed = t.Online
	var all CPUSet
	for _, n := range t.Nodes {
		all.Add(n.ID)
	}
	t.AllowedMems = all

	cs, err := r.cgroupCpuset()
	if err != nil {
		return err
	}
	if cs.haveCPUs {
		t.Allowed = t.Allowed.And(cs.cpus)
	}
	if cs.haveMems {
		t.AllowedMems = t.AllowedMems.And(cs.mems)
	}
	if b, err := r.read("proc/self/status"); err == nil {
		st, err := parseStatus(b)
		if err != nil {
			return wrap("proc/self/status", err)
		}
		if st.hasCPUs && r.statusCPUs {
			t.Allowed = t.Allowed.And(st.cpus)
		}
		if st.hasMems {
			t.AllowedMems = t.AllowedMems.And(st.mems)
		}
	}
	t.restrict()
	return nil
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
	where              string // the cpus file read, for reports
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
// A missing file means no restriction; a malformed one is an error.
func (r *reader) cgroupCpuset() (cpuset, error) {
	var cs cpuset
	b, err := r.read("proc/mounts")
	if err != nil {
		return cs, nil
	}
	var mnt *mount
	mounts := parseMounts(b)
	for i := range mounts {
		m := &mounts[i]
		switch {
		case m.fstype == "cgroup2":
			c, err := r.read(fsPath(m.dir, "cgroup.controllers"))
			if err == nil && slices.Contains(strings.Fields(clean(c)), "cpuset") {
				mnt = m
			}
		case m.fstype == "cpuset", m.fstype == "cgroup" && slices.Contains(m.options, "cpuset"):
			mnt = m
		}
		if mnt != nil {
			break
		}
	}
	if mnt == nil {
		return cs, nil
	}
	group, ok := r.cgroupPath(mnt.fstype == "cgroup2")
	if !ok {
		return cs, nil
	}
	cpusFile, memsFile := "cpuset.cpus", "cpuset.mems"
	switch {
	case mnt.fstype == "cgroup2":
		cpusFile, memsFile = "cpuset.cpus.effective", "cpuset.mems.effective"
	case mnt.fstype == "cpuset", slices.Contains(mnt.options, "noprefix"):
		cpusFile, memsFile = "cpus", "mems"
	}
	cs.where = "/" + fsPath(mnt.dir, group, cpusFile)
	for _, f := range []struct {
		name string
		dst  *CPUSet
		ok   *bool
	}{{cpusFile, &cs.cpus, &cs.haveCPUs}, {memsFile, &cs.mems, &cs.haveMems}} {
		p := fsPath(mnt.dir, group, f.name)
		set, err := r.list(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return cs, err
		case set.IsEmpty():
			r.note("%s is empty: ignored", p)
			continue
		}
		*f.dst, *f.ok = set, true
	}
	return cs, nil
}

// cgroupPath returns the process's cgroup relative to the cpuset mount:
// the unified hierarchy's "0::" line for cgroup v2, the line naming the
// cpuset controller for v1.
func (r *reader) cgroupPath(v2 bool) (string, bool) {
	if b, err := r.read("proc/self/cpuset"); err == nil {
		if p := clean(b); p != "" {
			return p, true
		}
	}
	b, err := r.read("proc/self/cgroup")
	if err != nil {
		return "", false
	}
	// Lines are "hierarchy-ID:controller-list:cgroup-path" (cgroups(7)).
	for line := range strings.SplitSeq(clean(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		unified := parts[0] == "0" && parts[1] == ""
		if unified == v2 && (unified || slices.Contains(strings.Split(parts[1], ","), "cpuset")) {
			return parts[2], true
		}
	}
	return "", false
}

// fsPath joins absolute path pieces into an fs.FS path (no leading slash).
func fsPath(elem ...string) string {
	return strings.TrimPrefix(path.Clean("/"+path.Join(elem...)), "/")
}
