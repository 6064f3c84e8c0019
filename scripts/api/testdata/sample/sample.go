// Package sample is what the API lister reads in its test.
package sample

import "fmt"

// Limit is a constant.
const Limit, hidden = 3, 4

// ErrX is a variable.
var ErrX = fmt.Errorf("x")

// T is a type whose fields are not listed.
type T struct{ Field int }

// NewT is T's constructor.
func NewT() *T { return &T{} }

// M is listed.
func (t *T) M(n int) error { return nil }

// String implements fmt.Stringer: not listed.
func (t *T) String() string { return "" }

func (t *T) private() {}

// G is generic.
func G[E any, K comparable](m map[K]E) []E { return nil }

// Box is a generic type.
type Box[E any] struct{ v E }

// Get is listed.
func (b Box[E]) Get() E { return b.v }

type inner struct{}

// Exported is a method of an unexported type: not listed.
func (inner) Exported() {}
