package pipeline

import (
	"testing"

	"github.com/numapool/numapool/pool"
)

// newPool starts a pool for one test or benchmark and closes it afterwards.
func newPool(tb testing.TB) *pool.Pool {
	tb.Helper()
	p, err := pool.New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Error(err)
		}
	})
	return p
}
