package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown prints the tables of WriteNotedTables as Markdown: a
// section per workload with its figures, and for a memory workload its
// sizing and its locality table.
func WriteMarkdown(w io.Writer, sums []Summary, wls []Workload, notes map[string]string) {
	for _, wl := range wls {
		var rows []Summary
		for _, s := range sums {
			if s.Workload == wl.Name {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		dir := "lower is better"
		if wl.Higher {
			dir = "higher is better"
		}
		fmt.Fprintf(w, "\n### %s\n\n%s (%s, %s).\n", wl.Name, mdText(wl.About), wl.Unit, dir)
		if n := notes[wl.Name]; n != "" {
			fmt.Fprintf(w, "\n%s.\n", mdText(strings.ToUpper(n[:1])+n[1:]))
		}
		fmt.Fprintln(w, "\n| contender | median | min–max | vs best other | vs sequential | extra |")
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | --- |")
		for _, s := range rows {
			if s.NA != "" {
				fmt.Fprintf(w, "| %s | n/a | | | | %s |\n", s.Contender, mdText(s.NA))
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s–%s | %s | %s | %s |\n", s.Contender, num(s.Median), num(s.Min), num(s.Max),
				ratio(s.VsBest), ratio(s.VsSequential), mdText(extras(s.Extra)))
		}
		if v, ok := verdictOf(rows, wl); ok {
			l := verdictLine(v)
			fmt.Fprintf(w, "\n%s.\n", mdText(strings.ToUpper(l[:1])+l[1:]))
		}
		writeMemoryMarkdown(w, wl, rows)
	}
}

// writeMemoryMarkdown is writeMemory in Markdown.
func writeMemoryMarkdown(w io.Writer, wl Workload, rows []Summary) {
	first := firstMemory(rows)
	if first == nil {
		return
	}
	fmt.Fprintf(w, "\nArrays: %s together, sized against %s of last-level cache (%.1fx it; memory budget %s).\n",
		bytesText(first.Bytes), bytesText(first.LLCBytes), float64(first.Bytes)/float64(max(first.LLCBytes, 1)), bytesText(first.BudgetBytes))
	fmt.Fprintf(w, "\n**%s locality**: the share of the bytes of one untimed pass processed on the node that holds them. "+
		"A chunk runs on the node its thread reports (pin.CurrentCPU) at both its start and its end; its pages are sampled at its first, "+
		"middle and last element of each array with move_pages.", wl.Name)
	if first.MemoryNodes <= 1 {
		fmt.Fprint(w, " With one memory node every byte is on the node that processes it, so this machine cannot tell the contenders apart.")
	}
	fmt.Fprintln(w, "\n\n| contender | local | allocation |")
	fmt.Fprintln(w, "| --- | ---: | --- |")
	for _, s := range rows {
		switch {
		case s.NA != "":
			continue
		case s.Memory == nil:
			fmt.Fprintf(w, "| %s | - | |\n", s.Contender)
		case s.Memory.LocalPct == nil:
			fmt.Fprintf(w, "| %s | not measured | %s |\n", s.Contender, mdText(s.Memory.Allocation))
		default:
			fmt.Fprintf(w, "| %s | %.1f %% | %s |\n", s.Contender, *s.Memory.LocalPct, mdText(s.Memory.Allocation))
		}
	}
}

// mdText escapes what would end a table cell or start markup.
func mdText(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`).Replace(s)
}

// The wait-policy table: the hand-off workloads (back to back, and after
// a pause longer than the block time; on the machine's nodes and on two
// synthetic one-CPU nodes) for the passive default, the active policy and
// a goroutine with a channel.
var (
	handOffRows = []struct{ workload, what string }{
		{"pingpong", "back to back, the machine's nodes"},
		{"pingpong-2x1", "back to back, two one-CPU nodes (2x1)"},
		{"pingpong-spaced", "after a pause, the machine's nodes"},
		{"pingpong-spaced-2x1", "after a pause, two one-CPU nodes (2x1)"},
	}
	policyColumns = []struct{ contender, what string }{
		{"numapool", "passive (default)"},
		{"numapool-active", "active"},
		{"goroutines", "a goroutine and a channel"},
	}
)

const waitPolicyIntro = `
### Hand-offs by wait policy

pool.Run from ordinary code (µs, median and 99th percentile; the workloads below have the details).
Back to back, a worker is still searching when the next call comes; after a pause of 200µs, longer
than the default block time, a passive pool's workers sleep and each call wakes a thread, while an
active pool's keep searching, on up to half the CPUs.

`

// WriteWaitPolicy writes, as Markdown, the wait-policy table from the hand-off
// workloads' summaries: a row per workload the run has, the median and
// the p99 of each policy; nothing if the run has none of them.
func WriteWaitPolicy(w io.Writer, sums []Summary) {
	find := func(wl, c string) *Summary {
		for i := range sums {
			if sums[i].Workload == wl && sums[i].Contender == c {
				return &sums[i]
			}
		}
		return nil
	}
	var rows []string
	for _, row := range handOffRows {
		cells := []string{row.what}
		have := false
		for _, col := range policyColumns {
			s := find(row.workload, col.contender)
			switch {
			case s == nil:
				cells = append(cells, "not run")
			case s.NA != "":
				cells = append(cells, "n/a")
			default:
				have = true
				cell := num(s.Median)
				if p99, ok := s.Extra["p99"]; ok {
					cell += " (p99 " + num(p99) + ")"
				}
				cells = append(cells, cell)
			}
		}
		if have {
			rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprint(w, waitPolicyIntro)
	head := []string{"hand-off"}
	for _, col := range policyColumns {
		head = append(head, col.what)
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "| --- "+strings.Repeat("| ---: ", len(policyColumns))+"|")
	for _, row := range rows {
		fmt.Fprintln(w, row)
	}
}
