// Package poolvar publishes a pool's Stats through the standard library's
// expvar, so that a service's /debug/vars shows them. It is a package of
// its own because importing expvar registers /debug/vars on
// http.DefaultServeMux, which a program that only uses the pool may not
// want.
package poolvar

import (
	"expvar"

	"github.com/numapool/numapool/pool"
)

// Publish publishes p's Stats under name: each read of /debug/vars (or
// expvar.Get(name).String()) takes a fresh pool.Stats, as JSON with
// snake_case names. Like expvar.Publish it panics if name is already
// published. The published variable keeps p reachable, so p must be
// closed explicitly.
func Publish(name string, p *pool.Pool) {
	expvar.Publish(name, expvar.Func(func() any { return p.Stats() }))
}
