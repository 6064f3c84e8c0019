package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/numapool/numapool/pin"
	"github.com/numapool/numapool/pool"
)

// On the machine's nodes and on two synthetic ones, every node's block is
// filled, and its sum is that of i*i over the block: an index written
// into another node's slice, or not at all, changes a sum.
func TestRun(t *testing.T) {
	for _, spec := range []string{"", "2x1"} {
		opts := []pool.Option{pool.WithoutEnv()}
		if spec != "" {
			opts = append(opts, pool.WithSpec(spec))
		}
		p, err := pool.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		const n = 10_001
		var out bytes.Buffer
		err = run(&out, p, n)
		if errors.Is(err, pin.ErrUnsupported) {
			p.Close()
			t.Skip("no NUMA memory placement on this system")
		}
		if err != nil {
			t.Fatalf("spec %q: %v", spec, err)
		}
		var want bytes.Buffer
		for _, blk := range p.Split(n) {
			sum := 0.0
			for i := blk.Lo; i < blk.Hi; i++ {
				sum += float64(i) * float64(i)
			}
			fmt.Fprintf(&want, "node %d: [%d, %d) in its own memory, sum %.0f\n", blk.Node, blk.Lo, blk.Hi, sum)
		}
		if spec == "2x1" && len(p.Split(n)) != 2 {
			t.Errorf("2x1: %d blocks, want 2", len(p.Split(n)))
		}
		if out.String() != want.String() {
			t.Errorf("spec %q:\n%s\nwant:\n%s", spec, out.String(), want.String())
		}
		p.Close()
	}
}

// README.md's node-local example is run's code, from the allocation to the
// end of the loop, one tab less indented: the code this package compiles
// and TestRun runs.
func TestReadmeShowsRun(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	first := -1
	for i, l := range lines {
		if strings.Contains(l, "(TestReadmeShowsRun keeps them the same)") {
			first = i + 1
		}
	}
	if first < 0 {
		t.Fatal("main.go lacks the comment that marks what README.md shows")
	}
	var shown []string
	for _, l := range lines[first:] {
		shown = append(shown, strings.TrimPrefix(l, "\t"))
		if l == "\t})" {
			break
		}
	}
	want := "```go\n" + strings.Join(shown, "\n") + "\n```"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md lacks run's lines as main.go has them:\n%s", want)
	}
}
