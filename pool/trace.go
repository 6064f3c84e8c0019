package pool

import (
	"context"
	"runtime/trace"
	"strconv"
)

// Execution traces. While runtime/trace records (trace.IsEnabled), each
// ParallelFor, MapReduce, Group and Async or Run call is a trace task,
// named numapool.ParallelFor and so on; the part of it that one worker
// runs at a time (a loop piece, a MapReduce helper, a Group function, the
// Async function) is a region of that task whose type names the worker's
// node ("numapool.node 0"), so go tool trace shows each unit's work per
// node; and each take of tasks from another node (a steal from its
// workers, a pull from its shard) is a log event in category
// numapool.cross-node. With tracing off each of these costs one branch.

// traceRegionType is the region type of a unit's work on w's node.
func (w *Worker) traceRegionType() string {
	return "numapool.node " + strconv.Itoa(w.domain.node.ID)
}

// traceRegion starts the region of w's work for the trace task of ctx;
// the caller ends it. Call it only when trace.IsEnabled.
func (w *Worker) traceRegion(ctx context.Context) *trace.Region {
	return trace.StartRegion(ctx, w.traceRegionType())
}

// callTrace is a Run's or an Async's trace task: its context and end.
type callTrace struct {
	ctx context.Context
	end func()
}
