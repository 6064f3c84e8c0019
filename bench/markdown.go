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
		"A chunk runs on the node getcpu reports at both its start and its end; its pages are sampled at its first, "+
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
