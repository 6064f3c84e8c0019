package observe

import (
	"context"
	"runtime/trace"
)

// Task begins a trace task named name under ctx if tracing is on; end
// ends it, and is nil when tracing is off.
func Task(ctx context.Context, name string) (_ context.Context, end func()) {
	if !trace.IsEnabled() {
		return ctx, nil
	}
	ctx, t := trace.NewTask(ctx, name)
	return ctx, t.End
}
