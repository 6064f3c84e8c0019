package settings

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

func TestParseBlockTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"200us", 200 * time.Microsecond, false},
		{" 1ms ", time.Millisecond, false},
		{"3", 3 * time.Millisecond, false},
		{"INFINITE", -1, false},
		{"-1ms", 0, true},
		{"soon", 0, true},
		{"", 0, true},
	} {
		got, err := ParseBlockTime(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && got != tc.want) {
			t.Errorf("ParseBlockTime(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestParseWaitPolicyAndBool(t *testing.T) {
	if a, err := ParseWaitPolicy(" Active"); !a || err != nil {
		t.Errorf("ParseWaitPolicy(Active) = %v, %v", a, err)
	}
	if _, err := ParseWaitPolicy("busy"); err == nil {
		t.Error("ParseWaitPolicy(busy) took it")
	}
	for in, want := range map[string]bool{"TRUE": true, "1": true, "false": false, "0": false} {
		if got, err := ParseBool(in); got != want || err != nil {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseBool("yes"); err == nil {
		t.Error("ParseBool(yes) took it")
	}
}

// A NUMAPOOL_* variable that is no setting is named with the nearest
// setting; settings, the harness's variables and other variables are not.
func TestUnknown(t *testing.T) {
	known := []string{"NUMAPOOL_NUM_WORKERS", "NUMAPOOL_PLACES"}
	got := Unknown([]string{"NUMAPOOL_WORKERS=2", "NUMAPOOL_PLACES=cores", "NUMAPOOL_TEST_X=1", "PATH=/bin", "NUMAPOOL_PLACE=x"}, known)
	want := []string{
		"NUMAPOOL_PLACE is not a numapool setting (did you mean NUMAPOOL_PLACES?)",
		"NUMAPOOL_WORKERS is not a numapool setting (did you mean NUMAPOOL_NUM_WORKERS?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Unknown = %q, want %q", got, want)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

func TestWarnOnce(t *testing.T) {
	Forget()
	var b bytes.Buffer
	WarnOnce(&b, []string{"a", "b"})
	WarnOnce(&b, []string{"b", "c"})
	if got := b.String(); got != "numapool: warning: a\nnumapool: warning: b\nnumapool: warning: c\n" {
		t.Errorf("printed %q", got)
	}
}

func TestParseWatch(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "1s": time.Second, "200ms": 200 * time.Millisecond,
		"5": 5 * time.Millisecond, " 1000 ": time.Second} {
		if got, err := ParseWatch(in); got != want || err != nil {
			t.Errorf("ParseWatch(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1s", "-5", "soon", "", "1.5"} {
		if _, err := ParseWatch(in); err == nil {
			t.Errorf("ParseWatch(%q) took it", in)
		}
	}
}
