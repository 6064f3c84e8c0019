package place

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// The tightest limit is the one named, and the runtime's headroom comes
// off it.
func TestCheckThreadsNamesTheTightestLimit(t *testing.T) {
	bounds := []threadBound{{room: 1000, what: "loose"}, {room: 300, what: "tight"}, {room: 500, what: "middle"}}
	room := 300 - runtimeHeadroom()
	if left, err := checkThreads(room, "", bounds); err != nil || left != 0 {
		t.Errorf("%d workers in a room of %d: %d left, %v", room, room, left, err)
	}
	if left, err := checkThreads(room-5, "", bounds); err != nil || left != 5 {
		t.Errorf("%d workers in a room of %d: %d left, %v; want 5 (the spares' room)", room-5, room, left, err)
	}
	_, err := checkThreads(room+1, "", bounds)
	var le *LimitError
	if !errors.As(err, &le) || le.Room != room || !strings.Contains(err.Error(), "tight") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d workers", room+1)) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d more", room)) {
		t.Errorf("%d workers in a room of %d: %v", room+1, room, err)
	}
	if left, err := checkThreads(1<<30, "", nil); err != nil || left != math.MaxInt {
		t.Errorf("no limit: %d left, %v", left, err)
	}
}
