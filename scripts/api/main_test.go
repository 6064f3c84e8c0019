package main

import (
	"slices"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	got, err := list("testdata/sample")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"const Limit",
		"func (*T) M(n int) error",
		"func (Box[E]) Get() E",
		"func G[E any, K comparable](m map[K]E) []E",
		"func NewT() *T",
		"type Box[E any] struct",
		"type T struct",
		"var ErrX",
	}
	if !slices.Equal(got, want) {
		t.Errorf("list =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDiff(t *testing.T) {
	d := diff("a\nb\n", "b\nc\n")
	if d != "- a\n+ c\n" {
		t.Errorf("diff = %q", d)
	}
	if d := diff("a\n", "a\n"); d != "" {
		t.Errorf("diff of equal files = %q", d)
	}
}
