package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/numapool/numapool/pool"
	"golang.org/x/sync/errgroup"
)

const (
	csvLines = 2_000_000
	csvGrain = 8192 // lines per block
)

// LineError is a malformed record and its 1-based line number.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

var errFields = errors.New("want 3 fields: id,category,amount")

// parseRecord parses "id,category,amount" (amount in cents) and returns
// the category and amount.
func parseRecord(line []byte) (category []byte, amount int64, err error) {
	id, rest, ok1 := bytes.Cut(line, []byte{','})
	cat, amt, ok2 := bytes.Cut(rest, []byte{','})
	if !ok1 || !ok2 || len(cat) == 0 || bytes.IndexByte(amt, ',') >= 0 {
		return nil, 0, errFields
	}
	if _, err := strconv.ParseUint(string(id), 10, 64); err != nil {
		return nil, 0, fmt.Errorf("id: %w", err)
	}
	amount, err = strconv.ParseInt(string(amt), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("amount: %w", err)
	}
	return cat, amount, nil
}

// --- numapool: ParallelFor with a map per worker ---

func aggregateNumapool(ctx context.Context, p *pool.Pool, lines [][]byte) (map[string]int64, error) {
	sums := pool.NewPerWorker(p, func() map[string]int64 { return map[string]int64{} })
	err := p.ParallelFor(ctx, len(lines), csvGrain, func(w *pool.Worker, lo, hi int) error {
		m := *sums.Get(w)
		for i := lo; i < hi; i++ {
			cat, amount, err := parseRecord(lines[i])
			if err != nil {
				return &LineError{Line: i + 1, Err: err}
			}
			m[string(cat)] += amount
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	total := map[string]int64{}
	for _, m := range sums.All() {
		for cat, sum := range *m {
			total[cat] += sum
		}
	}
	return total, nil
}

// --- numapool: MapReduce, a map per chunk merged in chunk order ---

func aggregateMapReduce(ctx context.Context, p *pool.Pool, lines [][]byte) (map[string]int64, error) {
	return pool.MapReduce(ctx, p, len(lines), csvGrain,
		func(w *pool.Worker, lo, hi int) (map[string]int64, error) {
			m := map[string]int64{}
			for i := lo; i < hi; i++ {
				cat, amount, err := parseRecord(lines[i])
				if err != nil {
					return nil, &LineError{Line: i + 1, Err: err}
				}
				m[string(cat)] += amount
			}
			return m, nil
		},
		func(a, b map[string]int64) map[string]int64 {
			if a == nil {
				return b
			}
			for cat, sum := range b {
				a[cat] += sum
			}
			return a
		})
}

// --- errgroup: chunks, a map per chunk, merged at the end ---

func aggregateErrgroup(ctx context.Context, lines [][]byte) (map[string]int64, error) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	nchunks := (len(lines) + csvGrain - 1) / csvGrain
	parts := make([]map[string]int64, nchunks)
	for c := range nchunks {
		lo, hi := c*csvGrain, min((c+1)*csvGrain, len(lines))
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			m := map[string]int64{}
			for i := lo; i < hi; i++ {
				cat, amount, err := parseRecord(lines[i])
				if err != nil {
					return &LineError{Line: i + 1, Err: err}
				}
				m[string(cat)] += amount
			}
			parts[c] = m
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	total := map[string]int64{}
	for _, m := range parts {
		for cat, sum := range m {
			total[cat] += sum
		}
	}
	return total, nil
}

// --- scaffolding ---

var csvCategories = []string{"books", "games", "garden", "grocery", "health", "kitchen",
	"music", "office", "outdoor", "pets", "shoes", "sports", "tools", "toys", "travel", "video"}

// csvInput generates n lines deterministically; the given 1-based lines
// are malformed. It returns the lines and the expected sums.
func csvInput(n int, bad ...int) ([][]byte, map[string]int64) {
	var data []byte
	starts := make([]int, 0, n+1)
	want := map[string]int64{}
	x := uint64(88172645463325252)
	for i := 1; i <= n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		cat := csvCategories[x%uint64(len(csvCategories))]
		amount := int64(x>>20%2_000_000) - 100_000
		starts = append(starts, len(data))
		data = strconv.AppendInt(data, int64(i), 10)
		data = append(data, ',')
		data = append(data, cat...)
		data = append(data, ',')
		data = strconv.AppendInt(data, amount, 10)
		for _, b := range bad {
			if b == i {
				data = append(data, "x"...)
			}
		}
		data = append(data, '\n')
		want[cat] += amount
	}
	starts = append(starts, len(data))
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = data[starts[i] : starts[i+1]-1]
	}
	return lines, want
}

type aggregateFunc func(context.Context, *pool.Pool, [][]byte) (map[string]int64, error)

var aggregators = []struct {
	name string
	fn   aggregateFunc
}{
	{"numapool", aggregateNumapool},
	{"mapreduce", aggregateMapReduce},
	{"errgroup", func(ctx context.Context, _ *pool.Pool, lines [][]byte) (map[string]int64, error) {
		return aggregateErrgroup(ctx, lines)
	}},
}

func TestCSV(t *testing.T) {
	p := newPool(t)
	ctx := context.Background()

	lines, want := csvInput(csvLines)
	for _, a := range aggregators {
		got, err := a.fn(ctx, p, lines)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: sums differ:\n got %v\nwant %v", a.name, got, want)
		}
	}

	// One malformed line: every version reports it.
	const badLine = 1_234_567
	lines, _ = csvInput(csvLines, badLine)
	for _, a := range aggregators {
		got, err := a.fn(ctx, p, lines)
		var le *LineError
		if !errors.As(err, &le) || le.Line != badLine || got != nil {
			t.Errorf("%s: got %v, %v; want line %d", a.name, len(got), err, badLine)
		}
	}

	// Several: each version reports one of them (the one found first, not
	// necessarily the lowest line).
	bad := []int{1_900_000, 700_000, 1_500_000}
	lines, _ = csvInput(csvLines, bad...)
	for _, a := range aggregators {
		seen := map[int]int{}
		for range 20 {
			_, err := a.fn(ctx, p, lines)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("%s: %v", a.name, err)
			}
			seen[le.Line]++
		}
		for line := range seen {
			if !slices.Contains(bad, line) {
				t.Errorf("%s: reported line %d, not a bad one", a.name, line)
			}
		}
		t.Logf("%s: lines reported over 20 runs: %v", a.name, seen)
	}

	// Cancelled before the start: the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for _, a := range aggregators {
		if _, err := a.fn(cctx, p, lines); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: cancelled context: got %v", a.name, err)
		}
	}
}

func BenchmarkCSV(b *testing.B) {
	lines, want := csvInput(csvLines)
	ctx := context.Background()
	for _, a := range aggregators {
		b.Run(a.name, func(b *testing.B) {
			p := newPool(b)
			for b.Loop() {
				got, err := a.fn(ctx, p, lines)
				if err != nil || len(got) != len(want) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCSVError: a bad line a tenth of the way in; how soon does the
// job stop?
func BenchmarkCSVError(b *testing.B) {
	lines, _ := csvInput(csvLines, csvLines/10)
	ctx := context.Background()
	for _, a := range aggregators {
		b.Run(a.name, func(b *testing.B) {
			p := newPool(b)
			for b.Loop() {
				if _, err := a.fn(ctx, p, lines); err == nil {
					b.Fatal("no error")
				}
			}
		})
	}
}
