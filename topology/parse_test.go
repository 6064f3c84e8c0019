package topology

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

var cpuListCases = []struct {
	in      string
	want    []int
	wantErr error
}{
	{"", []int{}, nil},
	{"\n", []int{}, nil},
	{"0", []int{0}, nil},
	{"0-3", []int{0, 1, 2, 3}, nil},
	{"0-3\n\x00", []int{0, 1, 2, 3}, nil}, // NUL after the newline (128arm)
	{"\x00\n", []int{}, nil},              // cpu/nohz_full on two captures
	{"0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, nil},
	{"8,0-1", []int{0, 1, 8}, nil},
	{"3-3", []int{3}, nil},
	{"0-9:2/5", []int{0, 1, 5, 6}, nil},
	{"0-1023:1/256", []int{0, 256, 512, 768}, nil},
	{"0-7:4/4", []int{0, 1, 2, 3, 4, 5, 6, 7}, nil},
	{" 1 , 2 ", []int{1, 2}, nil},
	{"3-1", nil, ErrSyntax},
	{"a", nil, ErrSyntax},
	{"1-", nil, ErrSyntax},
	{"-1", nil, ErrSyntax},
	{"1,,2", nil, ErrSyntax},
	{"0-3:", nil, ErrSyntax},
	{"0-3:2", nil, ErrSyntax},
	{"0-3:0/4", nil, ErrSyntax},
	{"0-3:5/4", nil, ErrSyntax},
	{"3:1/2", nil, ErrSyntax},
	{"+1", nil, ErrSyntax},
	{"0x10", nil, ErrSyntax},
	{"0-4294967295", nil, ErrOutOfRange},
	{"99999999999999999999", nil, ErrOutOfRange},
	{"65536", nil, ErrOutOfRange},
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range cpuListCases {
		got, err := ParseCPUList([]byte(tc.in))
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("ParseCPUList(%q) error = %v, want %v", tc.in, err, tc.wantErr)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Text == "" || !strings.Contains(err.Error(), pe.Text) {
				t.Errorf("ParseCPUList(%q) error %v does not name the offending text", tc.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.List(), tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v", tc.in, got.List(), err, tc.want)
		}
	}
}

func TestParseCPUMask(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", []int{}, false},
		{"0", []int{}, false},
		{"00000000,00000000", []int{}, false},
		{"f", []int{0, 1, 2, 3}, false},
		{"00003", []int{0, 1}, false},
		{"0000,0000003f", []int{0, 1, 2, 3, 4, 5}, false}, // 48-bit kernel
		{"00000001,00000000", []int{32}, false},
		{"80000000,00000001\n\x00", []int{0, 63}, false},
		{"00ff00ff", []int{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}, false},
		{"g", nil, true},
		{"123456789", nil, true}, // a word wider than 32 bits
		{"1,,1", nil, true},
		{",1", nil, true},
		{"0-3", nil, true},
		{strings.Repeat("ffffffff,", 2048) + "ffffffff", nil, true}, // bits above MaxCPU
	} {
		got, err := ParseCPUMask([]byte(tc.in))
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseCPUMask(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got.List(), tc.want) {
			t.Errorf("ParseCPUMask(%q) = %v, %v; want %v", tc.in, got.List(), err, tc.want)
		}
	}
}

// A 4096-bit mask, as IA-64 kernels print it, is far longer than a page
// of a 128-byte sysfs read: it must parse whole.
func TestParseCPUMaskWide(t *testing.T) {
	words := make([]string, 128)
	for i := range words {
		words[i] = "00000000"
	}
	words[0] = "80000000"   // CPU 4095
	words[127] = "00000001" // CPU 0
	got, err := ParseCPUMask([]byte(strings.Join(words, ",") + "\n"))
	if err != nil || !slices.Equal(got.List(), []int{0, 4095}) {
		t.Fatalf("got %v, %v; want [0 4095]", got.List(), err)
	}
}

func TestCPUSetString(t *testing.T) {
	for _, in := range []string{"", "0", "0-3", "0-3,8,10-11", "1,3,5", "0-63,64-127,200"} {
		s, err := ParseCPUList([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseCPUList([]byte(s.String()))
		if err != nil || !again.Equal(s) {
			t.Errorf("round trip of %q via %q: %v, %v", in, s.String(), again, err)
		}
	}
	if got := NewCPUSet(0, 1, 2, 3, 8, 10, 11).String(); got != "0-3,8,10-11" {
		t.Errorf("String() = %q", got)
	}
}

func TestCPUSetAlgebra(t *testing.T) {
	a, b := RangeCPUSet(0, 69), NewCPUSet(3, 64, 200)
	if got := a.And(b).List(); !slices.Equal(got, []int{3, 64}) {
		t.Errorf("And = %v", got)
	}
	if got := a.Or(b).Len(); got != 71 {
		t.Errorf("Or has %d CPUs, want 71", got)
	}
	if got := b.AndNot(a).List(); !slices.Equal(got, []int{200}) {
		t.Errorf("AndNot = %v", got)
	}
	if !NewCPUSet(3).IsSubsetOf(a) || b.IsSubsetOf(a) {
		t.Error("IsSubsetOf wrong")
	}
	if !a.Intersects(b) || a.Intersects(NewCPUSet(300)) {
		t.Error("Intersects wrong")
	}
	if !NewCPUSet(1).Equal(NewCPUSet(1).Or(CPUSet{words: make([]uint64, 5)})) {
		t.Error("Equal must ignore trailing empty words")
	}
	if (CPUSet{}).First() != -1 || b.First() != 3 {
		t.Error("First wrong")
	}
}

// What a node-bound allocation can get: MemFree, the file pages and the
// reclaimable kernel memory (KReclaimable preferred over SReclaimable);
// nothing without MemFree.
func TestParseNodeAvailable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"Node 0 MemTotal: 100 kB\nNode 0 MemFree: 10 kB\nNode 0 Active(file): 5 kB\nNode 0 Inactive(file): 3 kB\nNode 0 KReclaimable: 2 kB\nNode 0 SReclaimable: 1 kB\n", 20 << 10, true},
		{"Node 1 MemFree: 10 kB\nNode 1 SReclaimable: 1 kB\n", 11 << 10, true},
		{"Node 1 MemTotal: 10 kB\n", 0, false},
		{"Node 0 MemFree: lots kB\n", 0, false},
		{"", 0, false},
		{"Node 0 MemFree: 9223372036854775807 kB\n", math.MaxInt64, true},
	} {
		got, ok := parseNodeAvailable([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseNodeAvailable(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   int64
		ok     bool
		hasErr bool
	}{
		{"MemTotal:       16318192 kB\nMemFree: 1 kB\n", 16318192 * 1024, true, false},
		{"Node 0 MemTotal:       1048576 kB\nNode 0 MemFree: 3 kB", 1 << 30, true, false},
		{"Node 4 MemTotal:       0 kB", 0, true, false},
		{"MemFree: 1 kB", 0, false, false},
		{"MemTotal: lots kB", 0, false, true},
		{"MemTotal: 12 MB", 0, false, true},
	} {
		got, ok, err := parseMemTotal([]byte(tc.in))
		if (err != nil) != tc.hasErr || ok != tc.ok || got != tc.want {
			t.Errorf("parseMemTotal(%q) = %d, %v, %v", tc.in, got, ok, err)
		}
	}
}

func TestParseDistances(t *testing.T) {
	got, err := parseDistances([]byte("10 21 31 21\n"))
	if err != nil || !slices.Equal(got, []int{10, 21, 31, 21}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "10 x", "10 -1"} {
		if _, err := parseDistances([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("parseDistances(%q) error = %v, want ErrSyntax", bad, err)
		}
	}
}

func TestParseCacheSize(t *testing.T) {
	for in, want := range map[string]int64{"48K": 48 << 10, "24576K": 24 << 20, "1M": 1 << 20, "512": 512, "0K": 0} {
		if got, err := parseCacheSize([]byte(in + "\n")); err != nil || got != want {
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "12Q", "-1K"} {
		if _, err := parseCacheSize([]byte(bad)); err == nil {
			t.Errorf("parseCacheSize(%q) accepted", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tcat\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n"
	st, err := parseStatus([]byte(in))
	if err != nil || !st.hasCPUs || !st.hasMems || st.cpus.String() != "0-1" || st.mems.String() != "0" {
		t.Fatalf("parseStatus = %+v, %v", st, err)
	}
	_, err = parseStatus([]byte("Cpus_allowed_list:\t0-x\n"))
	if err == nil || !strings.Contains(err.Error(), "Cpus_allowed_list") || !strings.Contains(err.Error(), "0-x") {
		t.Errorf("error %v should name the line and the text", err)
	}
}

func TestParseMounts(t *testing.T) {
	in := "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\nnone /dev/cpu\\040set cpuset rw 0 0\nshort line\n"
	var m []mount
	for line := range strings.SplitSeq(in, "\n") {
		if mt, ok := parseMount(line); ok {
			m = append(m, mt)
		}
	}
	if len(m) != 2 || m[0].fstype != "cgroup2" || m[1].dir != "/dev/cpu set" || !slices.Contains(m[0].options, "nosuid") {
		t.Fatalf("parseMount of each line = %+v", m)
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, tc := range cpuListCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseCPUList(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		// What parses must print back to an equal set.
		again, err := ParseCPUList([]byte(s.String()))
		if err != nil || !again.Equal(s) {
			t.Fatalf("%q parsed to %v, which reparses to %v, %v", b, s, again, err)
		}
	})
}

func FuzzParseCPUMask(f *testing.F) {
	for _, s := range []string{"", "0", "f", "0000,0000003f", "80000000,00000001\n\x00", "1,,1", "g"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseCPUMask(b)
		if err != nil {
			return
		}
		for c := range s.All() {
			if c < 0 || c >= MaxCPU {
				t.Fatalf("%q gave CPU %d", b, c)
			}
		}
	})
}

func FuzzParseSmall(f *testing.F) {
	for _, s := range []string{"MemTotal: 1 kB", "10 21", "48K", "Cpus_allowed_list:\t0-1", "a b c d 0 0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// None of these may panic, whatever the input.
		_, _, _ = parseMemTotal(b)
		_, _ = parseDistances(b)
		_, _ = parseCacheSize(b)
		_, _ = parseStatus(b)
		var ci cpuInfo
		for line := range strings.SplitSeq(string(b), "\n") {
			_, _ = parseMount(line)
			if !ci.add(line) {
				break
			}
		}
	})
}
