package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock returns a time that the test moves on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// drive runs a suite of two workloads of two repetitions each through p,
// the first taking 1.5 s a repetition and the second 30 s, as bench.Run
// calls Progress.
func drive(p *suiteProgress, c *fakeClock) {
	steps := []struct {
		what string
		took time.Duration
	}{{"spawn / numapool", 1500 * time.Millisecond}, {"spawn / goroutines", 1500 * time.Millisecond},
		{"triad / numapool", 30 * time.Second}, {"triad / goroutines", 30 * time.Second}}
	for i, s := range steps {
		p.update(i, len(steps), s.what)
		c.advance(s.took)
	}
	p.update(len(steps), len(steps), "")
}

// Off a terminal there is one line per finished workload with its time
// and the time so far, and the total at the end; no bar, no escapes.
func TestProgressLines(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	var b bytes.Buffer
	drive(newSuiteProgress(&b, false, 2, c.now), c)
	want := "numapool bench: spawn done in 3.0 s (1 of 2 workloads, 0:03 so far)\n" +
		"numapool bench: triad done in 60.0 s (2 of 2 workloads, 1:03 so far)\n" +
		"numapool bench: 2 workloads in 1:03\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// On a terminal the bar shows the time so far and the estimate, and the
// total replaces it at the end.
func TestProgressBar(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	var b bytes.Buffer
	drive(newSuiteProgress(&b, true, 2, c.now), c)
	out := b.String()
	draws := strings.Split(out, "\r")
	if len(draws) != 6 { // "", four bars, the clearing escape with the total
		t.Fatalf("%d redraws, want 5:\n%q", len(draws)-1, out)
	}
	for i, want := range []string{
		"0/4 0:00, estimating  spawn / numapool",
		"1/4 0:02, ~0:05 left  spawn / goroutines", // 1.5 s a repetition, 3 to go: 4.5 s, rounded
		"2/4 0:03, ~0:03 left  triad / numapool",
		"3/4 0:33, ~0:11 left  triad / goroutines",
	} {
		if !strings.Contains(draws[i+1], want) {
			t.Errorf("draw %d is %q, want it to have %q", i+1, draws[i+1], want)
		}
	}
	wide := newSuiteProgress(&b, true, 13, c.now)
	b.Reset()
	wide.update(123, 195, "pingpong-spaced-2x1 / numapool-goroutines")
	if n := len([]rune(b.String())); n > 80 {
		t.Errorf("a bar of %d columns, more than a terminal's 80: %q", n, b.String())
	}
	if last := draws[5]; last != "\033[Knumapool bench: 2 workloads in 1:03\n" {
		t.Errorf("last draw %q", last)
	}
	if strings.Contains(out, "done in") {
		t.Errorf("a terminal got the per-workload lines too:\n%q", out)
	}
}

// The estimate is the average repetition so far times the repetitions
// left; nothing is estimated before a repetition has finished.
func TestRemaining(t *testing.T) {
	for _, c := range []struct {
		elapsed     time.Duration
		done, total int
		want        time.Duration
		ok          bool
	}{
		{0, 0, 10, 0, false},
		{10 * time.Second, 1, 10, 90 * time.Second, true},
		{30 * time.Second, 3, 4, 10 * time.Second, true},
		{time.Minute, 4, 4, 0, true},
	} {
		got, ok := remaining(c.elapsed, c.done, c.total)
		if got != c.want || ok != c.ok {
			t.Errorf("remaining(%v, %d, %d) = %v, %v; want %v, %v", c.elapsed, c.done, c.total, got, ok, c.want, c.ok)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "0:00", 1499 * time.Millisecond: "0:01", 61 * time.Second: "1:01", 3725 * time.Second: "1:02:05",
	} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
}
