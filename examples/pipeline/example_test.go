package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/numapool/numapool/pool"
)

// sumByCategory reads "id,category,amount" lines and returns the total amount
// per category. A malformed line stops the job; the error names the line.
func sumByCategory(ctx context.Context, p *pool.Pool, csv []byte) (map[string]float64, error) {
	lines := bytes.Split(bytes.TrimSuffix(csv, []byte("\n")), []byte("\n"))
	return pool.MapReduce(ctx, p, len(lines), 4096,
		func(w *pool.Worker, lo, hi int) (map[string]float64, error) {
			sums := map[string]float64{} // this chunk's partial result
			for i := lo; i < hi; i++ {
				if len(bytes.TrimSpace(lines[i])) == 0 {
					continue // a blank line
				}
				f := strings.Split(string(bytes.TrimSuffix(lines[i], []byte("\r"))), ",") // parse
				if len(f) != 3 {
					return nil, fmt.Errorf("line %d: %d fields, want 3", i+1, len(f))
				}
				amount, err := strconv.ParseFloat(f[2], 64)
				if err != nil {
					return nil, fmt.Errorf("line %d: %w", i+1, err)
				}
				sums[strings.ToLower(f[1])] += amount // transform, aggregate
			}
			return sums, nil
		},
		func(a, b map[string]float64) map[string]float64 { // reduce, in chunk order
			for k, v := range b {
				a[k] += v
			}
			return a
		})
}

func Example_pipeline() {
	p, err := pool.New()
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	// 100,000 records, in 25 chunks of 4096 lines.
	var csv bytes.Buffer
	for i := range 100_000 {
		fmt.Fprintf(&csv, "%d,%s,%d.%02d\n", i, []string{"Books", "games", "Tools"}[i%3], i%50, i%100)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sums, err := sumByCategory(ctx, p, csv.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		fmt.Printf("%s %.2f\n", k, sums[k])
	}

	bad := bytes.Replace(csv.Bytes(), []byte("\n77777,"), []byte("\n77777;"), 1)
	_, err = sumByCategory(ctx, p, bad)
	fmt.Println(err)

	cancelled, stop := context.WithCancel(ctx)
	stop()
	_, err = sumByCategory(cancelled, p, csv.Bytes())
	fmt.Println(err)
	// Output:
	// books 833183.33
	// games 833166.67
	// tools 833150.00
	// line 77778: 2 fields, want 3
	// context canceled
}
