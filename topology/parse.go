package topology

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Errors that parsers wrap; callers branch on them with errors.Is.
var (
	// ErrTopology wraps every error that discovery returns.
	ErrTopology = errors.New("topology")
	// ErrSyntax reports text that does not follow the kernel's format.
	ErrSyntax = errors.New("bad syntax")
	// ErrOutOfRange reports a CPU or node number outside 0..MaxCPU-1.
	ErrOutOfRange = errors.New("number out of range")
)

// ParseError names the text a parser refused and why.
type ParseError struct {
	Text string // the offending text (one item or the whole input), its first 64 bytes and "…" if longer
	Err  error  // ErrSyntax, ErrOutOfRange or a strconv error
}

// parseError returns a ParseError quoting at most the start of text.
func parseError(text string, err error) *ParseError {
	return &ParseError{Text: shorten(text), Err: err}
}

func (e *ParseError) Error() string { return fmt.Sprintf("parsing %q: %v", e.Text, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// ParseCPUList parses the kernel's list format, used by cpulist,
// cpu/online, node/online, shared_cpu_list, cpuset.cpus and the
// Cpus_allowed_list line of /proc/PID/status (see cpuset(7), "List format"):
//
//	0-3,8,10-11
//	0-1023:2/256      (from 0 to 1023, the first 2 of every group of 256)
//
// Empty input (a memory-only node's cpulist) is the empty set.
func ParseCPUList(b []byte) (CPUSet, error) {
	var s CPUSet
	text := clean(b)
	if text == "" {
		return s, nil
	}
	for item := range strings.SplitSeq(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return CPUSet{}, parseError(text, fmt.Errorf("%w: empty item", ErrSyntax))
		}
		if err := addListItem(&s, item); err != nil {
			return CPUSet{}, err
		}
	}
	return s, nil
}

// addListItem adds one "a", "a-b" or "a-b:used/group" item to s.
func addListItem(s *CPUSet, item string) error {
	rng, stride, hasStride := strings.Cut(item, ":")
	lo, hi, isRange := strings.Cut(rng, "-")
	first, err := parseCPUNumber(lo, item)
	if err != nil {
		return err
	}
	last := first
	if isRange {
		if last, err = parseCPUNumber(hi, item); err != nil {
			return err
		}
		if last < first {
			return parseError(item, fmt.Errorf("%w: range ends before it starts", ErrSyntax))
		}
	}
	used, group := 1, 1
	if hasStride {
		if !isRange {
			return parseError(item, fmt.Errorf("%w: a stride needs a range", ErrSyntax))
		}
		u, g, ok := strings.Cut(stride, "/")
		if !ok {
			return parseError(item, fmt.Errorf("%w: stride is not used/group", ErrSyntax))
		}
		if used, err = parseCPUNumber(u, item); err != nil {
			return err
		}
		if group, err = parseCPUNumber(g, item); err != nil {
			return err
		}
		if used == 0 || group == 0 || used > group {
			return parseError(item, fmt.Errorf("%w: stride needs 0 < used <= group", ErrSyntax))
		}
	}
	for c := first; c <= last; c++ {
		if (c-first)%group < used {
			s.Add(c)
		}
	}
	return nil
}

func parseCPUNumber(text, item string) (int, error) {
	if text == "" || text[0] == '+' || text[0] == '-' {
		return 0, parseError(item, ErrSyntax)
	}
	n, err := strconv.ParseUint(text, 10, 32)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, parseError(item, ErrOutOfRange)
		}
		return 0, parseError(item, ErrSyntax)
	}
	if n >= MaxCPU {
		return 0, parseError(item, ErrOutOfRange)
	}
	return int(n), nil
}

// ParseCPUMask parses the kernel's mask format, used by cpumap,
// shared_cpu_map, thread_siblings and the Cpus_allowed line of
// /proc/PID/status (see cpuset(7), "Mask format"): comma-separated 32-bit
// hexadecimal words, most significant first, e.g.
//
//	00000000,00000000,0000000f
//
// The width follows the kernel's NR_CPUS; the first word may be shorter
// ("0000,0000003f"). Empty input is the empty set.
func ParseCPUMask(b []byte) (CPUSet, error) {
	var s CPUSet
	text := clean(b)
	if text == "" {
		return s, nil
	}
	words := strings.Split(text, ",")
	for i, w := range words {
		if w == "" || len(w) > 8 {
			return CPUSet{}, parseError(text, fmt.Errorf("%w: mask word %s is not 1 to 8 hex digits", ErrSyntax, quote(w)))
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return CPUSet{}, parseError(text, fmt.Errorf("%w: mask word %s is not hexadecimal", ErrSyntax, quote(w)))
		}
		base := (len(words) - 1 - i) * 32
		for v != 0 {
			bit := base + bits.TrailingZeros32(uint32(v))
			if bit >= MaxCPU {
				return CPUSet{}, parseError(text, ErrOutOfRange)
			}
			s.Add(bit)
			v &= v - 1
		}
	}
	return s, nil
}

// parseDistances parses a node's distance file: one relative distance per
// node, in node order, separated by spaces, e.g. "10 21 21 21".
func parseDistances(b []byte) ([]int, error) {
	text := clean(b)
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil, parseError(text, fmt.Errorf("%w: no distances", ErrSyntax))
	}
	out := make([]int, len(fields))
	for i, f := range fields {
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 {
			return nil, parseError(f, ErrSyntax)
		}
		out[i] = d
	}
	return out, nil
}

// parseMemTotal returns MemTotal in bytes from /proc/meminfo or a node's
// meminfo, whose lines look like
//
//	MemTotal:       16318192 kB
//	Node 0 MemTotal:       16318192 kB
//
// It reports ok=false if there is no MemTotal line.
func parseMemTotal(b []byte) (bytes int64, ok bool, err error) {
	for line := range strings.SplitSeq(clean(b), "\n") {
		_, rest, found := strings.Cut(line, "MemTotal:")
		if !found {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != "kB") {
			return 0, false, parseError(line, ErrSyntax)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, false, parseError(line, ErrSyntax)
		}
		if kb > math.MaxInt64>>10 {
			return 0, false, parseError(line, fmt.Errorf("%w: more than 8 EiB", ErrOutOfRange))
		}
		return kb << 10, true, nil
	}
	return 0, false, nil
}

// parseNodeAvailable returns what an allocation bound to a node can get
// without swapping, from the node's meminfo, whose lines look like
//
//	Node 0 MemFree:         3229476 kB
//
// MemFree, plus the file pages (Active(file), Inactive(file)) and the
// reclaimable kernel memory (KReclaimable, else SReclaimable) that the
// kernel gives up before it fails an allocation. It overstates what a
// binding can get rather than refuse one that would fit (not every file
// page can be dropped at once). ok is false without a MemFree line.
func parseNodeAvailable(b []byte) (bytes int64, ok bool) {
	kb := map[string]int64{}
	for line := range strings.SplitSeq(clean(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "Node" && f[4] == "kB" {
			if v, err := strconv.ParseInt(f[3], 10, 64); err == nil && v >= 0 {
				kb[strings.TrimSuffix(f[2], ":")] = v
			}
		}
	}
	memFree, ok := kb["MemFree"]
	if !ok {
		return 0, false
	}
	reclaimable, ok := kb["KReclaimable"]
	if !ok {
		reclaimable = kb["SReclaimable"]
	}
	total := memFree + kb["Active(file)"] + kb["Inactive(file)"] + reclaimable
	if total < 0 || total > math.MaxInt64>>10 { // a sum that wrapped, or past 8 EiB
		return math.MaxInt64, true
	}
	return total << 10, true
}

// parseCacheSize parses a cache's size file, e.g. "48K", "32768K" or "1M".
func parseCacheSize(b []byte) (int64, error) {
	text := clean(b)
	unit := int64(1)
	num := text
	if n := len(text); n > 0 {
		switch text[n-1] {
		case 'K', 'k':
			unit, num = 1<<10, text[:n-1]
		case 'M', 'm':
			unit, num = 1<<20, text[:n-1]
		case 'G', 'g':
			unit, num = 1<<30, text[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || num == "" || num[0] == '+' {
		return 0, parseError(text, ErrSyntax)
	}
	if v > math.MaxInt64/unit {
		return 0, parseError(text, fmt.Errorf("%w: more than 8 EiB", ErrOutOfRange))
	}
	return v * unit, nil
}

// procStatus holds what /proc/self/status says about placement.
type procStatus struct {
	cpus, mems       CPUSet
	hasCPUs, hasMems bool
}

// parseStatus reads the allowed lists of /proc/PID/status (proc(5)):
//
//	Cpus_allowed_list:	0-1
//	Mems_allowed_list:	0
func parseStatus(b []byte) (procStatus, error) {
	var st procStatus
	for line := range strings.SplitSeq(clean(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var err error
		switch key {
		case "Cpus_allowed_list":
			st.cpus, err = ParseCPUList([]byte(val))
			st.hasCPUs = true
		case "Mems_allowed_list":
			st.mems, err = ParseCPUList([]byte(val))
			st.hasMems = true
		}
		if err != nil {
			return procStatus{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	return st, nil
}

// mount is one line of /proc/mounts (fstab(5) fields).
type mount struct {
	device, dir, fstype string
	options             []string
}

// parseMount parses one line of /proc/mounts, e.g.
//
//	cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
//
// Octal escapes (\040 for a space) in the mount point are decoded; ok is
// false for a line with fewer than four fields.
func parseMount(line string) (m mount, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return mount{}, false
	}
	return mount{device: f[0], dir: unescapeMount(f[1]), fstype: f[2], options: strings.Split(f[3], ",")}, true
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
