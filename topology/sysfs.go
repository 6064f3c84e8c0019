package topology

import (
	"fmt"
	"io/fs"
	"os"
	"regexp"
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
// its root: a captured tree, or fstest.MapFS in tests.
//
// It applies hwloc's rules (see testdata/fixtures/SCHEMA.md): node CPUs are
// cpumap ∩ online, memory-only nodes have none, cores are the SMT sibling
// sets, packages the core_siblings sets, the allowed CPUs and nodes come
// from the cgroup cpuset of the process and from /proc/self/status.
//
// Odd files are read as hwloc reads them: a missing, empty, unreadable or
// malformed file that discovery can do without leaves what it describes
// unknown (or falls back to another file) and says so in Degraded, naming
// the file and quoting its value. Only when nothing usable is left (no CPU
// directory, no online or allowed CPU) is it an error, which names the
// file. Every file is read up to a size cap and up to its first NUL byte,
// and symbolic links are followed inside fsys as if it were the root: an
// absolute target starts at fsys's root, never at the host's.
func FromFS(fsys fs.FS) (*Topology, error) {
	return fromFS(fsys, "", true, true)
}

// fromFS reads fsys; arch is the running kernel's machine name when fsys
// is this machine's root, "" for a capture. statusCPUs says whether the
// Cpus_allowed_list of proc/self/status counts: not for this machine,
// where it is the main thread's mask of the moment and the process's
// starting affinity is used instead. inRoot says whether symbolic links
// are resolved inside fsys (a capture) rather than by the kernel (this
// machine's root, where the two agree).
func fromFS(fsys fs.FS, arch string, statusCPUs, inRoot bool) (*Topology, error) {
	r := &reader{fsys: fsys, arch: arch, statusCPUs: statusCPUs, inRoot: inRoot, live: !inRoot}
	t := &Topology{Source: "sysfs"}
	r.readMachine(t)
	if err := r.readCPUs(t); err != nil {
		return nil, err
	}
	r.readKinds(t)
	r.readNodes(t)
	r.readAllowed(t)
	t.Degraded = append(t.Degraded, r.finishNotes()...)
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// reader reads files of one filesystem root and remembers what it had to
// assume.
type reader struct {
	fsys       fs.FS
	inRoot     bool              // resolve symbolic links inside fsys
	links      map[string]string // resolved path -> its link target, "" if not a link
	notes      []string
	noted      int                 // notes made so far, merged ones included
	perCPU     map[string]*cpuNote // notes about cpuN files, by text with N for the number
	arch       string              // from proc/hwloc-nofile-info or the running kernel
	x86        bool
	amdCU      bool // AMD family 15h/16h: SMT siblings are distinct cores
	statusCPUs bool // narrow the allowed CPUs by proc/self/status
	knl        bool // Xeon Phi: L3 entries of size 0 are not caches
	live       bool // fsys is this machine's root: read what only it has (the PMU lists)
}

// cpuNote is one note about the same file of several CPUs.
type cpuNote struct {
	at   int    // index in notes
	text string // with cpuN for the CPU's directory
	cpus CPUSet
}

// cpuPath finds the cpuN directory in a note about a CPU's file.
var cpuPath = regexp.MustCompile(`sys/devices/system/cpu/cpu([0-9]+)/`)

// note records what discovery could not learn and what it assumed. Notes
// about the same file of several CPUs (cpu3/topology/core_id is empty,
// cpu4/topology/core_id is empty, ...) become one, listing the CPUs.
func (r *reader) note(format string, args ...any) {
	r.noted++
	text := fmt.Sprintf(format, args...)
	m := cpuPath.FindStringSubmatchIndex(text)
	if m == nil {
		r.notes = append(r.notes, text)
		return
	}
	cpu, err := strconv.Atoi(text[m[2]:m[3]])
	if err != nil || cpu >= MaxCPU {
		r.notes = append(r.notes, text)
		return
	}
	key := text[:m[2]] + "N" + text[m[3]:]
	if r.perCPU == nil {
		r.perCPU = make(map[string]*cpuNote)
	}
	n, ok := r.perCPU[key]
	if !ok {
		n = &cpuNote{at: len(r.notes), text: key}
		r.perCPU[key] = n
		r.notes = append(r.notes, text)
	}
	n.cpus.Add(cpu)
}

// finishNotes returns the notes, those about several CPUs' files merged.
func (r *reader) finishNotes() []string {
	for _, n := range r.perCPU {
		if n.cpus.Len() > 1 {
			r.notes[n.at] = fmt.Sprintf("CPUs %s: %s", n.cpus.short(), n.text)
		}
	}
	return r.notes
}

// readMachine learns the architecture and the processor's identity from
// proc/hwloc-nofile-info (captures only) and the first processor of
// proc/cpuinfo.
func (r *reader) readMachine(t *Topology) {
	if r.arch == "" {
		r.optionalLines("proc/hwloc-nofile-info", func(line string) bool {
			if v, ok := strings.CutPrefix(line, "Architecture: "); ok {
				r.arch = strings.TrimSpace(v)
			}
			return true
		})
	}
	r.x86 = r.arch == "x86_64" || r.arch == "k1om" || (len(r.arch) == 4 && r.arch[0] == 'i' && r.arch[2:] == "86")
	t.Machine.Arch = r.arch
	var info cpuInfo
	if !r.optionalLines("proc/cpuinfo", info.add) {
		return
	}
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

// add takes the next line of /proc/cpuinfo, whose first processor's
// block reads
//
//	vendor_id	: GenuineIntel
//	cpu family	: 6
//	model		: 85
//	model name	: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
//
// (ARM kernels say "Processor" or "model name"; POWER says "cpu"); it
// returns false at the end of that block.
func (ci *cpuInfo) add(line string) bool {
	key, val, ok := strings.Cut(line, ":")
	if !ok {
		// A blank line after the vendor or model ends the first processor.
		return (ci.vendor == "" && ci.model == "") || strings.TrimSpace(line) != ""
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
	return true
}
