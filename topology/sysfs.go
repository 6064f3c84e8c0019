package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Paths under the filesystem root, as the kernel lays them out.
const (
	cpuDir  = "sys/devices/system/cpu"
	nodeDir = "sys/devices/system/node"
)

// FromDir reads the topology of a captured Linux tree: dir holds sys/ and
// proc/ as a machine's / does. Affinity syscalls are not consulted, so the
// result depends on the files alone.
func FromDir(dir string) (*Topology, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTopology, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrTopology, dir)
	}
	t, err := FromFS(os.DirFS(dir))
	if err != nil {
		return nil, err
	}
	t.Source = "sysfs:" + dir
	return t, nil
}

// FromFS reads the topology from a filesystem holding sys/ and proc/ at
// its root: os.DirFS("/") for this machine, a captured tree in tests.
//
// It applies hwloc's rules (see testdata/fixtures/SCHEMA.md): node CPUs are
// cpumap ∩ online, memory-only nodes have none, cores are the SMT sibling
// sets, packages the core_siblings sets, the allowed CPUs and nodes come
// from the cgroup cpuset of the process and from /proc/self/status. A
// malformed file is an error naming the file and the text; a missing
// optional file is recorded in Degraded.
func FromFS(fsys fs.FS) (*Topology, error) {
	return fromFS(fsys, "", true)
}

// fromFS reads fsys; arch is the running kernel's machine name when fsys
// is this machine's root, "" for a capture. statusCPUs says whether the
// Cpus_allowed_list of proc/self/status counts: not for this machine,
// where it is the main thread's mask of the moment and the process's
// starting affinity is used instead.
func fromFS(fsys fs.FS, arch string, statusCPUs bool) (*Topology, error) {
	r := &reader{fsys: fsys, arch: arch, statusCPUs: statusCPUs}
	t := &Topology{Source: "sysfs"}
	r.readMachine(t)
	if err := r.readCPUs(t); err != nil {
		return nil, err
	}
	if err := r.readNodes(t); err != nil {
		return nil, err
	}
	if err := r.readAllowed(t); err != nil {
		return nil, err
	}
	t.Degraded = append(t.Degraded, r.notes...)
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// reader reads files of one filesystem root and remembers what it had to
// assume.
type reader struct {
	fsys       fs.FS
	notes      []string
	arch       string // from proc/hwloc-nofile-info or the running kernel
	x86        bool
	amdCU      bool // AMD family 15h/16h: SMT siblings are distinct cores
	statusCPUs bool // narrow the allowed CPUs by proc/self/status
	knl        bool // Xeon Phi: L3 entries of size 0 are not caches
}

func (r *reader) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// read returns a whole file: sysfs and procfs files may exceed a page on
// machines with thousands of CPUs, so nothing here reads a fixed buffer.
func (r *reader) read(path string) ([]byte, error) {
	b, err := fs.ReadFile(r.fsys, path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTopology, err)
	}
	return b, nil
}

func (r *reader) exists(path string) bool {
	_, err := fs.Stat(r.fsys, path)
	return err == nil
}

// wrap names the file in a parse error.
func wrap(path string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrTopology, path, err)
}

func (r *reader) list(path string) (CPUSet, error) { return r.cpuSet(path, ParseCPUList) }

func (r *reader) mask(path string) (CPUSet, error) { return r.cpuSet(path, ParseCPUMask) }

// cpuSet reads path and parses it with parse, naming the file on error.
func (r *reader) cpuSet(path string, parse func([]byte) (CPUSet, error)) (CPUSet, error) {
	b, err := r.read(path)
	if err != nil {
		return CPUSet{}, err
	}
	s, err := parse(b)
	if err != nil {
		return CPUSet{}, wrap(path, err)
	}
	return s, nil
}

// isListFile reports whether a sysfs file holds a list ("0-3,8") rather
// than a mask ("0000010f"): *list files, online, possible, has_*.
func isListFile(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, "list") || base == "online" || base == "possible" ||
		base == "present" || strings.HasPrefix(base, "has_")
}

// maskOrList reads the first of the given files that exists, as a list or
// a mask according to its name. found is false when none exists; a file
// that exists but does not parse is an error.
func (r *reader) maskOrList(paths ...string) (s CPUSet, found bool, err error) {
	for _, p := range paths {
		if isListFile(p) {
			s, err = r.list(p)
		} else {
			s, err = r.mask(p)
		}
		if err == nil {
			return s, true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return CPUSet{}, false, err
		}
	}
	return CPUSet{}, false, nil
}

// integer reads a decimal file; ok is false when the file does not exist.
func (r *reader) integer(path string) (n int, ok bool, err error) {
	b, err := r.read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err = parseInt(b)
	if err != nil {
		return 0, false, wrap(path, err)
	}
	return n, true, nil
}

// numberedEntries lists the entries of dir named prefix<N>, sorted by N.
func (r *reader) numberedEntries(dir, prefix string) ([]int, error) {
	ents, err := fs.ReadDir(r.fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTopology, err)
	}
	var out []int
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || num == "" {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n >= MaxCPU || strconv.Itoa(n) != num {
			continue // cpufreq, cpuidle, ... or a name we do not know
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// readMachine learns the architecture and the processor's identity from
// proc/hwloc-nofile-info (captures only) and proc/cpuinfo.
func (r *reader) readMachine(t *Topology) {
	b, err := r.read("proc/hwloc-nofile-info")
	if r.arch == "" && err == nil {
		for line := range strings.SplitSeq(clean(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Architecture: "); ok {
				r.arch = strings.TrimSpace(v)
			}
		}
	}
	r.x86 = r.arch == "x86_64" || r.arch == "k1om" || (len(r.arch) == 4 && r.arch[0] == 'i' && r.arch[2:] == "86")
	t.Machine.Arch = r.arch
	b, err = r.read("proc/cpuinfo")
	if err != nil {
		return
	}
	info := parseCPUInfo(b)
	t.Machine.Vendor, t.Machine.Model = info.vendor, info.model
	t.Machine.Family, t.Machine.Number = info.family, info.number
	if r.x86 {
		r.amdCU = info.vendor == "AuthenticAMD" && (info.family == 21 || info.family == 22)
		r.knl = info.vendor == "GenuineIntel" && info.family == 6 && (info.number == 87 || info.number == 133)
	}
}

type cpuInfo struct {
	vendor, model  string
	family, number int
}

// parseCPUInfo reads the first processor's block of /proc/cpuinfo:
//
//	vendor_id	: GenuineIntel
//	cpu family	: 6
//	model		: 85
//	model name	: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
//
// ARM kernels say "Processor" or "model name"; POWER says "cpu".
func parseCPUInfo(b []byte) cpuInfo {
	var ci cpuInfo
	for line := range strings.SplitSeq(clean(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			if ci.vendor != "" || ci.model != "" {
				if strings.TrimSpace(line) == "" {
					break // end of the first processor
				}
			}
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "vendor_id", "vendor":
			ci.vendor = val
		case "model name", "Processor", "cpu":
			if ci.model == "" {
				ci.model = val
			}
		case "cpu family", "family":
			ci.family, _ = strconv.Atoi(val)
		case "model":
			ci.number, _ = strconv.Atoi(val)
		}
	}
	return ci
}
