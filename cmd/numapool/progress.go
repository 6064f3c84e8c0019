package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// suiteProgress reports how far numapool bench has come, on standard
// error. On a terminal it redraws one bar with the time so far and an
// estimate of the time left; elsewhere (a log, a pipe) a redrawn line is
// noise, so it writes one line per finished workload with its time. Either
// way it ends with the suite's total time. Its update is bench.Config's
// Progress, which bench.Run calls from one goroutine only.
type suiteProgress struct {
	w         io.Writer
	tty       bool
	now       func() time.Time
	workloads int // in the suite

	start, wlStart time.Time
	wl             string // the workload running, "" before the first
	finished       int    // workloads finished
}

func newSuiteProgress(w io.Writer, tty bool, workloads int, now func() time.Time) *suiteProgress {
	return &suiteProgress{w: w, tty: tty, now: now, workloads: workloads, start: now()}
}

// update is called before each repetition with the repetitions done so
// far, and once more with done == total and what == "" at the end; what
// is "workload / contender".
func (p *suiteProgress) update(done, total int, what string) {
	t := p.now()
	wl, _, _ := strings.Cut(what, " / ")
	if wl != p.wl {
		if p.wl != "" {
			p.finished++
			if !p.tty {
				fmt.Fprintf(p.w, "numapool bench: %s done in %s (%d of %d workloads, %s so far)\n",
					p.wl, seconds(t.Sub(p.wlStart)), p.finished, p.workloads, clock(t.Sub(p.start)))
			}
		}
		p.wl, p.wlStart = wl, t
	}
	if done >= total {
		if p.tty {
			fmt.Fprint(p.w, "\r\033[K")
		}
		fmt.Fprintf(p.w, "numapool bench: %s in %s\n", plural(p.finished, "workload"), clock(t.Sub(p.start)))
		return
	}
	if p.tty {
		// The bar, the counts, the times and what runs fit in 80 columns:
		// a line that wraps is not redrawn by a carriage return.
		const width = 20
		filled := width * done / max(total, 1)
		left := "estimating"
		if r, ok := remaining(t.Sub(p.start), done, total); ok {
			left = "~" + clock(r) + " left"
		}
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d %s, %s  %-24.24s", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
			done, total, clock(t.Sub(p.start)), left, what)
	}
}

// remaining estimates the time left from the time elapsed over done of
// total repetitions, as if every repetition took as long as the average
// so far: the suite's repetitions differ by workload, so the estimate
// moves as the workloads change. ok is false before the first
// repetition has finished, when there is nothing to go on.
func remaining(elapsed time.Duration, done, total int) (d time.Duration, ok bool) {
	if done <= 0 || total <= done {
		return 0, done > 0
	}
	return time.Duration(float64(elapsed) / float64(done) * float64(total-done)), true
}

// clock gives d as m:ss, or h:mm:ss from an hour, to the second.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// seconds gives d in seconds with one decimal.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}
