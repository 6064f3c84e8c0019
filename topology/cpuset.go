package topology

import (
	"encoding/json"
	"iter"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU bounds the CPU (and node) numbers a CPUSet accepts from parsed
// input. Linux's NR_CPUS tops out at 8192 today; the bound is generous but
// stops a malformed file such as "0-4294967295" from allocating gigabytes.
const MaxCPU = 1 << 16

// CPUSet is a set of CPU numbers (or NUMA node numbers: the kernel uses the
// same list and mask formats for both). The zero value is the empty set.
// A CPUSet is a value: methods that return a set never modify the receiver.
type CPUSet struct {
	words []uint64
}

// NewCPUSet returns the set of the given CPUs.
func NewCPUSet(cpus ...int) CPUSet {
	var s CPUSet
	for _, c := range cpus {
		s.Add(c)
	}
	return s
}

// CPUSetFromMask returns the set whose members are the bits of mask, in
// the kernel's cpumask layout on a 64-bit machine: bit i of word j is CPU
// 64*j + i.
func CPUSetFromMask(mask []uint64) CPUSet {
	n := len(mask)
	for n > 0 && mask[n-1] == 0 {
		n--
	}
	return CPUSet{words: slices.Clone(mask[:n])}
}

// Mask returns s in the kernel's cpumask layout (see CPUSetFromMask): a
// fresh slice, one word per 64 CPUs up to the highest member.
func (s CPUSet) Mask() []uint64 {
	n := len(s.words)
	for n > 0 && s.words[n-1] == 0 {
		n--
	}
	return slices.Clone(s.words[:n])
}

// RangeCPUSet returns the set {lo, lo+1, ..., hi}.
func RangeCPUSet(lo, hi int) CPUSet {
	var s CPUSet
	for c := lo; c <= hi; c++ {
		s.Add(c)
	}
	return s
}

// Add inserts cpu into s. It panics on a negative number, which would be a
// programming error: parsers reject negative input before calling Add.
func (s *CPUSet) Add(cpu int) {
	if cpu < 0 {
		panic("topology: CPUSet.Add of a negative CPU number")
	}
	w := cpu / 64
	if w >= len(s.words) {
		s.words = append(s.words, make([]uint64, w+1-len(s.words))...)
	}
	s.words[w] |= 1 << (cpu % 64)
}

// Remove deletes cpu from s.
func (s *CPUSet) Remove(cpu int) {
	if cpu < 0 || cpu/64 >= len(s.words) {
		return
	}
	s.words[cpu/64] &^= 1 << (cpu % 64)
}

// Has reports whether cpu is in s.
func (s CPUSet) Has(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.words) {
		return false
	}
	return s.words[cpu/64]&(1<<(cpu%64)) != 0
}

// Len returns the number of CPUs in s.
func (s CPUSet) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether s has no CPU.
func (s CPUSet) IsEmpty() bool {
	for _, w := range s.words {
		if w != 0 {
			return false
		}
	}
	return true
}

// First returns the lowest CPU in s, or -1 if s is empty.
func (s CPUSet) First() int {
	for i, w := range s.words {
		if w != 0 {
			return i*64 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// All yields the CPUs of s in increasing order.
func (s CPUSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range s.words {
			for w != 0 {
				b := bits.TrailingZeros64(w)
				if !yield(i*64 + b) {
					return
				}
				w &= w - 1
			}
		}
	}
}

// List returns the CPUs of s in increasing order (never nil, so that JSON
// shows an empty set as []).
func (s CPUSet) List() []int {
	out := make([]int, 0, s.Len())
	return slices.AppendSeq(out, s.All())
}

// And returns s ∩ o.
func (s CPUSet) And(o CPUSet) CPUSet {
	n := min(len(s.words), len(o.words))
	r := CPUSet{words: make([]uint64, n)}
	for i := range n {
		r.words[i] = s.words[i] & o.words[i]
	}
	return r
}

// Or returns s ∪ o.
func (s CPUSet) Or(o CPUSet) CPUSet {
	a, b := s.words, o.words
	if len(a) < len(b) {
		a, b = b, a
	}
	r := CPUSet{words: slices.Clone(a)}
	for i, w := range b {
		r.words[i] |= w
	}
	return r
}

// AndNot returns s \ o.
func (s CPUSet) AndNot(o CPUSet) CPUSet {
	r := CPUSet{words: slices.Clone(s.words)}
	for i := range min(len(r.words), len(o.words)) {
		r.words[i] &^= o.words[i]
	}
	return r
}

// Intersects reports whether s and o share a CPU.
func (s CPUSet) Intersects(o CPUSet) bool {
	for i := range min(len(s.words), len(o.words)) {
		if s.words[i]&o.words[i] != 0 {
			return true
		}
	}
	return false
}

// Equal reports whether s and o hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool {
	a, b := s.words, o.words
	if len(a) < len(b) {
		a, b = b, a
	}
	for i, w := range a {
		var v uint64
		if i < len(b) {
			v = b[i]
		}
		if w != v {
			return false
		}
	}
	return true
}

// IsSubsetOf reports whether every CPU of s is in o.
func (s CPUSet) IsSubsetOf(o CPUSet) bool {
	return s.AndNot(o).IsEmpty()
}

// String formats s in the kernel's cpulist format, e.g. "0-3,8,10-11".
// The empty set formats as "".
func (s CPUSet) String() string {
	var b strings.Builder
	start, prev := -1, -2
	flush := func() {
		if start < 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(start))
		if prev > start {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(prev))
		}
	}
	for c := range s.All() {
		if c != prev+1 {
			flush()
			start = c
		}
		prev = c
	}
	flush()
	return b.String()
}

// short is String cut to the length errors and notes quote.
func (s CPUSet) short() string { return shorten(s.String()) }

// MarshalJSON encodes s as a sorted array of integers, the form the
// fixtures' expected.json uses.
func (s CPUSet) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.List())
}

// UnmarshalJSON accepts an array of integers or a cpulist string.
func (s *CPUSet) UnmarshalJSON(b []byte) error {
	var list []int
	if err := json.Unmarshal(b, &list); err == nil {
		var r CPUSet
		for _, c := range list {
			if c < 0 || c >= MaxCPU {
				return &ParseError{Text: strconv.Itoa(c), Err: ErrOutOfRange}
			}
			r.Add(c)
		}
		*s = r
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	r, err := ParseCPUList([]byte(str))
	if err != nil {
		return err
	}
	*s = r
	return nil
}
